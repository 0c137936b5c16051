"""Same seed, same machine, same figures, across processes: ``evaluate``'s JSON (what
``jaxannot evaluate --json`` writes) for one method of every family, computed in two
fresh processes with different hash seeds, is identical but for its clock readings.

Within one process every registered method is checked by
``tests/annotators/test_api_protocols.py`` (a third fit of the first corpus); here what
a process could carry is varied: Python's string hashing (set and dict orders built from
hashes), the state of the interpreter and of JAX. The second process loads the programs
the first one compiled (JAX's persistent cache: the same executables) to save their
compile time; that XLA compiles the same program the same way is not what is tested
here."""

import json
import os
import subprocess
import sys

from jaxannot.annotators.discovery import method_modules

#: One method of each family (``jaxannot/methods/<family>``), the cheaper one where a
#: family's methods share their code (mix-unigram is lap-mix-unigram without the
#: graph, knn tagprop's neighbours without the learned weights); the test checks that
#: the list covers every family.
REPRESENTATIVES = ("mix-unigram", "dwh", "iale-svm", "sfsls", "emml", "knn", "ensemble")

#: Settings other than the defaults, cheaper ones (fewer topics, iterations, sweeps,
#: epochs: the same code runs, shorter): the ensemble fuses two of the cheapest
#: methods over two folds (its own code, the CV and the fusion, is what it adds;
#: a topic-model base refitted on the folds' shapes cost ~10 of the 42 CPU seconds)
HYPER = {
    "mix-unigram": {"iterations": 10},
    "dwh": {"topics": 40},
    "iale-svm": {"max_epochs": 100},
    "sfsls": {"iterations": 5},
    "emml": {"exact_sweeps": 300, "max_iterations": 30},
    "ensemble": {"bases": "knn,empirical", "folds": 2},
}

_SCRIPT = """
import json, sys
import jax
# the second process loads the first one's programs: the same binaries, minutes less
jax.config.update("jax_compilation_cache_dir", sys.argv[3])
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
from jaxannot.data import make_task
from jaxannot.data.synthetic import make_synthetic
from jaxannot.evaluation import evaluate
corpus = make_synthetic(seed=0, num_images=120, num_classes=True)
task = make_task(corpus, None, protocol="inductive", seed=0, test_fraction=0.25)
hyper = json.loads(sys.argv[4])
out = {
    m: evaluate(m, task, hyper=hyper.get(m), seed=0).as_json()
    for m in sys.argv[2].split(",")
}
with open(sys.argv[1], "w") as fh:
    json.dump(out, fh, sort_keys=True)
"""


def _run(tmp_path, hash_seed: str, xla_flags: str) -> dict:
    out = tmp_path / f"run-{hash_seed}.json"
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "XLA_FLAGS": xla_flags}
    subprocess.run(
        [
            sys.executable,
            "-c",
            _SCRIPT,
            str(out),
            ",".join(REPRESENTATIVES),
            str(tmp_path / "compiled"),
            json.dumps(HYPER),
        ],
        env=env,
        check=True,
        timeout=900,
    )
    return json.loads(out.read_text())


def test_the_representatives_cover_every_family():
    modules = method_modules()
    families = {modules[m].split(".")[0] for m in REPRESENTATIVES}
    assert families == {module.split(".")[0] for module in modules.values()}


def test_two_processes_give_the_same_figures(
    tmp_path, without_clock, fast_compile_flags
):
    # both processes compile cheaply (the same flags: the same programs)
    first = _run(tmp_path, "1", fast_compile_flags)
    second = _run(tmp_path, "2", fast_compile_flags)
    assert sorted(first) == sorted(REPRESENTATIVES)
    for method in REPRESENTATIVES:
        assert first[method]["metrics"], method
        assert without_clock(first[method]) == without_clock(second[method]), method


def test_a_changed_figure_is_seen(without_clock):
    # the comparison is not vacuous: one bit of one metric makes two runs differ
    run = {"metrics": {"map": 0.25}, "fit_seconds": 1.0, "info": {"loss": 2.0}}
    other = {
        "metrics": {"map": 0.25 + 2**-40},
        "fit_seconds": 9.0,
        "info": {"loss": 2.0},
    }
    assert without_clock(run) != without_clock(other)
    assert without_clock(run) == without_clock({**run, "fit_seconds": 9.0})
