"""Test configuration: CPU only, fixed seeds, the data root, and real-data guards."""

import gc
import importlib
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# the CLI's persistent compilation cache stays off in tests (tests of it turn it on
# in a folder of their own), so no test reads programs another run compiled
os.environ.setdefault("JAXANNOT_NO_COMPILATION_CACHE", "1")
# One JAX persistent compilation cache for this run of the suite: a fresh folder made
# by the first process (pytest itself, before xdist starts its workers, which inherit
# the variable; the child processes that tests start too), removed when the run ends
# (``pytest_unconfigure``). Many files fit the same methods on the same synthetic
# shapes; each file drops its compiled programs when it ends (below), and a fit drops
# them all past the program budget (``jaxannot.runtime.programs``), so without it
# every file, worker and child process compiles them again. A program loaded from the
# cache is the executable that was compiled, so figures are the same. Loading one
# (some 7 ms) costs less than compiling all but the smallest, so every program is
# stored (a minimum compile time of 0). ``count_compiles`` and the program budget
# count a program loaded as one compiled (jax records the compile event around both),
# so what they assert does not depend on the cache.
# ``JAXANNOT_TEST_COMPILATION_CACHE=0`` runs the suite without it.
_CACHE_SWITCH = "JAXANNOT_TEST_COMPILATION_CACHE"
_CACHE_ON = os.environ.get(_CACHE_SWITCH, "1") not in ("", "0")
_OWN_CACHE = _CACHE_ON and "JAX_COMPILATION_CACHE_DIR" not in os.environ
if _OWN_CACHE:
    os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="jaxannot-xla-")
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
os.environ.setdefault(
    "XLA_FLAGS", "--xla_force_host_platform_device_count=2"
)  # two virtual devices for sharding tests

#: The suite's XLA compiles cheaply. Through ``XLA_FLAGS`` (this process and the
#: processes tests start) it emits loop fusions with XLA's older LLVM IR emitter, not
#: the MLIR fusion emitters that recent jaxlibs use by default, and runs LLVM's
#: ``-O1`` pipeline instead of ``-O2``: the older emitter compiles the same programs
#: in about half the CPU (the harmoniums notebook's ``fit_cd`` programs 64.5 -> 20.6
#: s, the modelling notebook's VEM loops 48.7 -> 23.5 s), and ``-O1`` takes another
#: 15-25 % off files that fit many small models (``test_objectives.py`` with
#: ``test_vem.py``: 156 / 141 -> 113 / 124 CPU s, two runs each way). In the test
#: processes themselves a module compiles at ``-O0`` without LLVM's expensive passes
#: (jax's ``jax_disable_most_optimizations``; :func:`_xla_optimization`) unless it is
#: marked ``xla_optimized``: most modules fit tiny models and are mostly compiling, a
#: few run real-data or many-fit checks whose programs then run 2-3x slower. CPU
#: seconds of one module alone, ``-O0`` against ``-O1`` (run side by side on a 2-core
#: Intel Xeon): ``test_checks_baselines.py`` 30.5 / 39.3, ``test_vem.py`` 43.1 /
#: 60.1, ``test_diagnostics.py`` 43.7 / 49.3; marked ``xla_optimized``:
#: ``test_results.py`` 133.3 / 64.8, ``test_lapvar_auto.py``'s random-graph case 70.0
#: / 29.2, ``test_laplacian_elbo_lam.py`` 66.0 / 35.7, ``test_tagprop_annotator.py``
#: 40.3 / 27.8, ``test_laplacian_elbo.py`` 63.1 / 57.3, ``test_objectives.py`` 51.3 /
#: 45.4. Figures move in their last digits, as on another CPU; the stored-figure
#: tests' measured tolerances cover it. A jaxlib that does not know a flag (XLA aborts
#: a process on an unknown flag) keeps its defaults: :func:`_jaxlib_knows` probes them
#: once per run.
COMPILE_FLAGS = "--xla_cpu_use_fusion_emitters=false --xla_backend_optimization_level=1"
_COMPILE_VARIABLE = "JAXANNOT_TEST_COMPILE_FLAGS"


def _jaxlib_knows(flags: str) -> bool:
    """Whether this jaxlib starts with the XLA flags ``flags`` (a child process)."""
    probe = subprocess.run(
        [sys.executable, "-c", "import jax; jax.numpy.zeros(1).block_until_ready()"],
        env={**os.environ, "XLA_FLAGS": flags, "JAX_PLATFORMS": "cpu"},
        capture_output=True,
    )
    return probe.returncode == 0


if _COMPILE_VARIABLE not in os.environ:  # the first process; workers inherit it
    known = _jaxlib_knows(COMPILE_FLAGS)
    os.environ[_COMPILE_VARIABLE] = COMPILE_FLAGS if known else ""
if os.environ[_COMPILE_VARIABLE] not in os.environ["XLA_FLAGS"]:
    os.environ["XLA_FLAGS"] += f" {os.environ[_COMPILE_VARIABLE]}"

import jax  # noqa: E402  (after the environment it reads)


def _write_cache_entries_atomically() -> None:
    """Make the run's compilation cache safe for its concurrent processes.

    jax's file cache (``jax._src.lru_cache.LRUCache.put``, jax 0.10) writes an entry in
    place (``Path.write_bytes``: truncate, then write) when it keeps no size bound (no
    lock then): a worker that reads the entry while the other worker writes it reads a
    truncated program, and jax's warning about it ("Error reading persistent compilation
    cache entry") is an error under the suite's ``filterwarnings``. Here an entry is
    written to a file of the writer's own, then renamed onto its name: a reader sees no
    entry or all of it. A jax without these internals keeps its own ``put``.
    """
    try:
        from jax._src import lru_cache

        suffix, put = lru_cache._CACHE_SUFFIX, lru_cache.LRUCache.put
    except (ImportError, AttributeError):
        return

    def atomic_put(self, key: str, value: bytes) -> None:
        if self.eviction_enabled or not key:  # a bounded cache locks; "" raises
            return put(self, key, value)
        path = self.path / f"{key}{suffix}"
        if path.exists():
            return
        part = path.with_name(f"{path.name}.{os.getpid()}.part")
        part.write_bytes(value)
        os.replace(part, path)

    lru_cache.LRUCache.put = atomic_put


if _CACHE_ON:
    _write_cache_entries_atomically()

if os.environ.get("JAXANNOT_X64"):
    jax.config.update("jax_enable_x64", True)


def _data_root() -> pathlib.Path | None:
    env = os.environ.get("JAXANNOT_DATA")
    candidates = [pathlib.Path(env)] if env else []
    candidates.append(pathlib.Path(__file__).resolve().parents[2] / "shared" / "data")
    for c in candidates:
        if c.is_dir():
            return c
    return None


@pytest.fixture(scope="session")
def data_root() -> pathlib.Path:
    """The shared real-data folder. Under CI=true a missing folder is a failure."""
    root = _data_root()
    if root is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("CI=true but JAXANNOT_DATA does not point at the shared data")
        pytest.skip("real data not available (set JAXANNOT_DATA)")
    return root


#: XLA flags for the processes a test starts (notebook kernels, fresh interpreters)
#: whose checks are on what a run computes, not on how fast its programs run: LLVM's
#: cheap pipeline. Their time is mostly XLA compiling (the harmoniums notebook's about
#: three quarters; ``test_reproducible``'s two processes some 20 % less CPU with it).
#: Figures move a little against XLA's default level (the harmoniums notebook's MMH
#: test accuracy 0.700 -> 0.675, one of 40 images).
FAST_COMPILE = (
    "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"
)


@pytest.fixture
def fast_compile() -> str:
    """``FAST_COMPILE`` alone: ``XLA_FLAGS`` for a process a test starts with a
    device count of its own (XLA's default, one)."""
    return FAST_COMPILE


@pytest.fixture
def fast_compile_flags() -> str:
    """``XLA_FLAGS`` for a process a test starts: this process's flags (the device
    count, ``COMPILE_FLAGS``) and ``FAST_COMPILE``."""
    return f"{os.environ.get('XLA_FLAGS', '')} {FAST_COMPILE}"


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


@pytest.fixture
def rng_key() -> jax.Array:
    return jax.random.key(0)


class _CompileCounter:
    """Counts XLA backend compiles while active (``jax.monitoring`` events); no fit
    inside releases the compiled programs (``jaxannot.runtime.programs``), so a
    count of zero means what was compiled before was reused."""

    def __init__(self):
        self.count = 0
        self.active = False
        self._keep = None

    def __enter__(self):
        from jaxannot.runtime.programs import keep_programs

        self.count = 0
        self.active = True
        self._keep = keep_programs()
        self._keep.__enter__()
        return self

    def __exit__(self, *exc):
        self.active = False
        self._keep.__exit__(*exc)


_COUNTER = _CompileCounter()


def _on_event(name, _duration, **_kwargs):
    if _COUNTER.active and name == "/jax/core/compile/backend_compile_duration":
        _COUNTER.count += 1


jax.monitoring.register_event_duration_secs_listener(_on_event)


@pytest.fixture
def count_compiles():
    """``with count_compiles() as c: ...; assert c.count == 0`` — backend compiles (a
    program loaded from the run's compilation cache counts as one)."""
    return lambda: _COUNTER


def _wait_for_numpy(proc, timeout: float = 120.0) -> None:
    """Wait until process ``proc`` has loaded numpy's C extension: a ``jaxannot``
    command is then past the interpreter's own start-up and inside ``main``
    (nothing the CLI imports before a command runs loads numpy)."""
    maps = pathlib.Path(f"/proc/{proc.pid}/maps")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if "_multiarray_umath" in maps.read_text():
                return
        except OSError:
            break
        time.sleep(0.002)
    raise AssertionError(f"process {proc.pid} never loaded numpy")


@pytest.fixture
def wait_for_numpy():
    """``wait_for_numpy(popen)``: block until the child process has imported numpy
    (Linux: read from ``/proc/PID/maps``; skipped elsewhere)."""
    if not pathlib.Path("/proc/self/maps").is_file():
        pytest.skip("needs /proc/PID/maps")
    return _wait_for_numpy


@pytest.fixture(autouse=True, scope="module")
def _xla_optimization(request):
    """Compile the module's programs at ``-O0`` without LLVM's expensive passes,
    or, for a module marked ``xla_optimized``, as ``XLA_FLAGS`` says (see
    :data:`COMPILE_FLAGS`). The compiled programs are released after every module
    (:func:`_release_compiled_programs`), and the option is part of the persistent
    compilation cache's key, so no module runs another's programs."""
    optimized = request.node.get_closest_marker("xla_optimized") is not None
    previous = jax.config.read("jax_disable_most_optimizations")
    jax.config.update("jax_disable_most_optimizations", not optimized)
    yield
    jax.config.update("jax_disable_most_optimizations", previous)


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Drop jax's compiled programs after every test module.

    Each XLA CPU executable holds a few memory maps; a test worker that keeps the
    programs of half the suite alive passed 50,000 maps and then crashed inside
    XLA's compiler at Linux's limit (``vm.max_map_count`` = 65,530): a segfault in
    ``backend_compile_and_load`` late in full runs, never in a file alone.
    """
    yield
    from jaxannot.runtime.programs import release_compiled_programs

    release_compiled_programs()  # jax.clear_caches(), the builder caches, gc


@pytest.fixture(scope="session")
def benchmark_script():
    """A loader of the benchmark scripts and tools by module name
    (``benchmarks.claims.mmh_claim``, ``tools.results_tables``): the repository root
    is on ``sys.path`` (pytest's ``pythonpath``)."""
    return importlib.import_module


def _without_clock(value):
    """``value`` (an evaluation's JSON) without its clock readings: the keys that
    name seconds or a time, at any depth."""
    if isinstance(value, dict):
        return {
            k: _without_clock(v)
            for k, v in value.items()
            if not ("seconds" in k or k.endswith("_time"))
        }
    if isinstance(value, list):
        return [_without_clock(v) for v in value]
    return value


@pytest.fixture
def without_clock():
    """``without_clock(evaluation_json)``: the figures of a run, for comparing two runs
    of the same seed (clock readings differ from run to run, nothing else may)."""
    return _without_clock


def pytest_unconfigure(config):
    """The run's compilation cache goes when the process that made it ends."""
    if _OWN_CACHE and not hasattr(config, "workerinput"):
        shutil.rmtree(os.environ["JAX_COMPILATION_CACHE_DIR"], ignore_errors=True)


def pytest_collection_modifyitems(session, config, items):
    """Run the notebook tests first (the order within each group is kept).

    ``--dist loadfile --no-loadscope-reorder`` (the Makefile's) hands files to the
    workers in collection order (without the flag, xdist sorts them by their number
    of tests, which put these one-test files last), and the
    notebooks' small modes are the longest files of the suite (45-100 s each on two
    cores); collected last, they ran one after another on one worker while the other
    sat idle. Started first, the short files fill in around them.
    """
    items.sort(key=lambda item: item.path.parent.name != "notebooks")


def pytest_collection_finish(session):
    """Move what collection made (every test module, the libraries they import,
    some 380,000 objects in all) into the garbage collector's permanent generation
    (:func:`gc.freeze`). They live until the process ends either way; frozen, the
    collector no longer walks them in each full collection: the automatic ones during
    the tests (tracing makes many objects) and the ``gc.collect`` of every module's
    program release (:func:`_release_compiled_programs`), some 0.25 s each before."""
    gc.collect()
    gc.freeze()
