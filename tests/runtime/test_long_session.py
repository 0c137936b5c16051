"""Long sessions: the compiled programs of many configurations stay bounded
(``jaxannot.runtime.programs``), so the process's memory mappings stay flat."""

import itertools
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import jax
import jax.numpy as jnp

from jaxannot.annotators import Fitted, Method
from jaxannot.data import Corpus
from jaxannot.runtime import programs

MAPS = pathlib.Path("/proc/self/maps")
needs_maps = pytest.mark.skipif(not MAPS.is_file(), reason="needs /proc/self/maps")


def _mappings() -> int:
    with MAPS.open() as f:
        return sum(1 for _ in f)


@pytest.fixture
def budget():
    """``budget(n)`` sets the program budget for the test (restored after), starting
    from no program."""
    programs.release_compiled_programs()
    previous = programs.set_program_budget(None)
    yield lambda n: programs.set_program_budget(n)
    programs.set_program_budget(previous)
    programs.release_compiled_programs()


# ----------------------------------------------- a method that compiles one shape
@jax.jit
def _program(x):
    return jnp.cumsum(x * 2.0) + x.sum()


def _shapes_fit(corpus, *, rng_key, size: int) -> Fitted:
    """Compiles one program whose shape is ``size`` (a configuration that changes a
    compiled shape, as a topic count does), and keeps nothing compiled itself."""
    del rng_key
    total = float(np.asarray(_program(np.ones(int(size), np.float32)))[-1])
    return Fitted("shapes", {"total": np.float32(total)}, {"size": int(size)}, {})


SHAPES = Method("shapes", _shapes_fit, hyper={"size": 1}, needs=("words",))
KEY = jax.random.key(0)  # made once: a key compiles programs of its own


@pytest.fixture(scope="module")
def corpus():
    rng = np.random.default_rng(0)
    return Corpus.from_arrays(
        {"features": rng.random((40, 4)).astype(np.float32)},
        view_kinds={"features": "real"},
        words=(rng.random((40, 3)) > 0.5).astype(np.float32),
        name="tiny",
    )


def _fit_configurations(sizes, corpus, fit=None):
    """Fit one configuration per size; the mappings after each fit."""
    fit = fit or (lambda s: SHAPES.fit(corpus, rng_key=KEY, size=s))
    after = []
    for size in sizes:
        fit(size)
        after.append(_mappings())
    return np.asarray(after)


# ------------------------------------------------------------------ the budget
def test_fits_release_the_programs_over_the_budget_and_only_then(budget, corpus):
    budget(3)
    key = KEY
    for size in (2, 3, 4):
        SHAPES.fit(corpus, rng_key=key, size=size)
    assert programs.programs_since_release() == 3 and programs.releases() >= 1
    before = programs.releases()
    SHAPES.fit(corpus, rng_key=key, size=2)  # a refit: nothing new, no release
    assert programs.releases() == before and programs.programs_since_release() == 3
    SHAPES.fit(corpus, rng_key=key, size=5)  # a 4th program: released at the next fit
    assert programs.programs_since_release() == 4
    with programs.keep_programs():  # ... but never inside keep_programs
        SHAPES.fit(corpus, rng_key=key, size=6)
    assert programs.releases() == before
    SHAPES.fit(corpus, rng_key=key, size=2)
    assert programs.releases() == before + 1
    # size 2 compiled again: 1 when this file runs alone; 2 in a full run of the
    # suite (measured), where the release also dropped a program of another file
    assert 1 <= programs.programs_since_release() <= 2
    # the wrapped fit is the method's own
    assert SHAPES.fit.__wrapped__ is _shapes_fit
    assert SHAPES.fit.__module__ == __name__


def test_the_budget_comes_from_the_environment_when_not_set(budget, monkeypatch):
    monkeypatch.setenv("JAXANNOT_MAX_PROGRAMS", "17")
    assert programs.program_budget() == 17
    budget(5)
    assert programs.program_budget() == 5
    budget(None)
    monkeypatch.delenv("JAXANNOT_MAX_PROGRAMS")
    assert programs.program_budget() == programs.DEFAULT_BUDGET
    for bad in ("0", "many"):
        monkeypatch.setenv("JAXANNOT_MAX_PROGRAMS", bad)
        with pytest.raises(ValueError, match="JAXANNOT_MAX_PROGRAMS"):
            programs.program_budget()
    with pytest.raises(ValueError, match="positive"):
        programs.set_program_budget(0)


def test_a_release_empties_the_builder_caches(budget):
    built = []

    @programs.bounded_cache(2)
    def builder(n):
        built.append(n)
        return object()

    first = builder(1)
    assert builder(1) is first and builder.cache_info().maxsize == 2
    builder(2), builder(3)  # the LRU keeps 2: 1 is evicted
    builder(1)
    assert built == [1, 2, 3, 1]
    programs.release_compiled_programs()
    assert builder.cache_info().currsize == 0


_LOADED = """
import jax, jax.numpy as jnp
from jaxannot.runtime import programs
hits = []
jax.monitoring.register_event_listener(
    lambda name, **_: hits.append(name == "/jax/compilation_cache/cache_hits")
)
x = jnp.arange(7.0)
step = jax.jit(lambda v: jnp.cumsum(v) * 3.0 + v.max())
step(x).block_until_ready()
programs.release_compiled_programs()
step(x).block_until_ready()  # the same program, loaded from the persistent cache
print(programs.programs_since_release(), sum(hits))
"""


def test_a_program_loaded_from_the_persistent_cache_counts_once(tmp_path):
    """jax records its compile event around loading a program from the persistent
    cache too: a loaded program counted once more for the cache hit made the budget
    release twice as often. (A fresh process with a cache of its own.)"""
    env = dict(
        os.environ,
        JAX_PLATFORMS="cpu",
        JAX_COMPILATION_CACHE_DIR=str(tmp_path),
        JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
    )
    out = subprocess.run(
        [sys.executable, "-c", _LOADED], env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    counted, hits = map(int, out.stdout.split())
    assert (counted, hits) == (1, 1)


# ------------------------------------------------------------- the mappings
def _check_flat(sizes, corpus, budget_size, slack):
    """Fit ``sizes`` (each a new shape); the mappings never pass the start plus
    ``slack`` (what ``budget_size`` programs hold, with room), while the same fits
    with no release grow past it."""
    start = _mappings()
    after = _fit_configurations(sizes, corpus)
    assert programs.releases() > 0
    assert after.max() - start < slack, (after.max() - start, slack)
    return after - start


@needs_maps
def test_mappings_stay_flat_over_40_configurations(budget, corpus):
    budget(8)
    released = programs.releases()
    growth = _check_flat(range(2, 42), corpus, 8, slack=300)
    assert programs.releases() - released >= 4  # 40 programs over a budget of 8
    # and without the bound they grow: 20 more shapes, no release
    start = _mappings()
    with programs.keep_programs():
        kept = _fit_configurations(range(42, 62), corpus)
    assert kept[-1] - start > 300 > growth.max()


@needs_maps
@pytest.mark.slow
def test_mappings_stay_flat_over_200_configurations(budget, corpus):
    budget(8)
    _check_flat(range(2, 202), corpus, 8, slack=300)


# ------------------------------------------------- benchmarks/scale/long_session.py
def test_the_long_session_benchmark_records_every_few_fits(benchmark_script, budget):
    bench = benchmark_script("benchmarks.scale.long_session")
    first = list(itertools.islice(bench.configurations(), 8))
    assert [n for n, _ in first[:4]] == list(bench.METHODS)
    assert first[0][1]["topics"] != first[4][1]["topics"]  # a new shape each round
    with pytest.raises(ValueError, match="unknown methods"):
        next(bench.configurations(("nope",)))
    result = bench.run(5, 2, 20, True, ("knn",))
    assert [r["fits"] for r in result["records"]] == [2, 4, 5]
    last = result["records"][-1]
    assert last["rss_mib"] > 0 and last["compile_seconds"] >= 0
    assert last["mappings"] > 0 or not MAPS.is_file()
