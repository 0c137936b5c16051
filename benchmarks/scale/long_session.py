"""A long session: many shape-changing configurations fitted in one process.

What a ``jaxannot tune --search`` over integer hyper-parameters, a ``GridSearchCV``
or a notebook session does: it fits configurations that change a compiled shape
(mix-unigram topic counts, lap-mix-unigram topics x neighbours, tagprop neighbours,
knn k) one after another, in one process. Every ``--every`` fits it records the
process's memory mappings (lines of ``/proc/self/maps``), its resident memory, the
seconds spent compiling (JAX's monitoring events) and the program releases of
:mod:`jaxannot.runtime.programs`; with the bound they stay flat, without it
(``--no-release``) they grow until Linux's 65,530-mapping limit ends the process.

The data are a synthetic corpus (``--images`` images, 4 words, a bag view of 12
visual words): the point is the number of configurations, not the fits.

Writes ``benchmarks/results/long_session[_SUFFIX].json``.

    python -m benchmarks.scale.long_session                     # 1,000 configurations
    python -m benchmarks.scale.long_session --fits 40 --every 10 --suffix tiny
"""

from __future__ import annotations

import itertools
import json
import os
import pathlib
import platform
import resource
import sys
import time
import warnings

from benchmarks.common.cli import script_parser
from benchmarks.common.device import use_device
from benchmarks.common.records import RESULTS, write_json


def mappings() -> int:
    """Lines of ``/proc/self/maps`` (0 where there is none)."""
    try:
        with open("/proc/self/maps") as f:
            return sum(1 for _ in f)
    except OSError:
        return 0


def rss_mib() -> float:
    """Resident memory now (``/proc/self/status``), else the peak (getrusage)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


METHODS = ("mix-unigram", "lap-mix-unigram", "tagprop", "knn")


def configurations(methods: tuple[str, ...] = METHODS, images: int = 40):
    """The endless cycle of configurations of ``methods`` (of :data:`METHODS`), each
    a ``(method, hyper)`` pair that changes a compiled shape from its predecessor of
    the same method: mix-unigram's topic count grows by one, lap-mix-unigram's
    topics by one for each of 3 and 4 neighbours; knn's ``k`` and tagprop's
    neighbours cycle below ``images`` (larger values are clipped to the images, so a
    search revisits them, as a real one does)."""
    mix = ({"topics": k, "iterations": 2} for k in itertools.count(2))
    lap = (
        {"topics": k, "neighbors": n, "iterations": 2, "warm_start": 1}
        for k in itertools.count(2)
        for n in (3, 4)
    )
    tag = ({"neighbors": n, "steps": 3} for n in itertools.cycle(range(3, images - 1)))
    knn = ({"k": k} for k in itertools.cycle(range(1, images - 1)))
    unknown = sorted(set(methods) - set(METHODS))
    if unknown:
        raise ValueError(f"unknown methods {unknown}; valid: {list(METHODS)}")
    for hypers in zip(mix, lap, tag, knn, strict=False):
        for name, hyper in zip(METHODS, hypers, strict=True):
            if name in methods:
                yield name, hyper


def tiny_corpus(images: int, seed: int = 0):
    """A synthetic corpus: ``images`` images, a 12-word bag view, 4 words."""
    import numpy as np

    from jaxannot.data import Corpus

    rng = np.random.default_rng(seed)
    return Corpus.from_arrays(
        {"visual": rng.integers(0, 3, (images, 12)).astype(np.float32)},
        view_kinds={"visual": "bag"},
        words=(rng.random((images, 4)) > 0.5).astype(np.float32),
        name="long-session",
    )


def run(
    fits: int,
    every: int,
    images: int,
    release: bool,
    methods: tuple[str, ...] = METHODS,
) -> dict:
    """Fit ``fits`` configurations of ``methods``; a record every ``every`` fits
    (and after the last).

    Parameters
    ----------
    fits, every, images : int
        Configurations fitted, fits between records, images of the corpus.
    release : bool
        Whether the program budget is in force (False: none, to show the growth).
    methods : tuple of str
        The methods whose configurations are cycled through.

    Returns
    -------
    dict
        The settings and the records (mappings, RSS in MiB, compile and wall
        seconds, releases so far).
    """
    import jax
    import jax.monitoring

    from jaxannot.annotators import get_method
    from jaxannot.runtime import programs

    compile_seconds = [0.0]

    def on_duration(name, seconds, **_kwargs):
        if name == "/jax/core/compile/backend_compile_duration":
            compile_seconds[0] += seconds

    jax.monitoring.register_event_duration_secs_listener(on_duration)
    if not release:
        programs.set_program_budget(10**9)
    # two-topic fits of random bags collapse by design here: not the point
    warnings.filterwarnings("ignore", message=".*fit collapsed")
    corpus = tiny_corpus(images)
    key = jax.random.key(0)
    records = []
    start = time.perf_counter()
    chosen = itertools.islice(configurations(methods, images), fits)
    for i, (name, hyper) in enumerate(chosen, 1):
        method = get_method(name)
        fitted = method.fit(corpus, rng_key=key, **hyper)
        jax.block_until_ready(method.score_words(fitted, corpus))
        if i % every == 0 or i == fits:
            records.append(
                {
                    "fits": i,
                    "mappings": mappings(),
                    "rss_mib": round(rss_mib(), 1),
                    "compile_seconds": round(compile_seconds[0], 2),
                    "wall_seconds": round(time.perf_counter() - start, 2),
                    "releases": programs.releases(),
                }
            )
            print(json.dumps(records[-1]), flush=True)
    return {
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
        "fits": fits,
        "every": every,
        "images": images,
        "release": release,
        "methods": list(methods),
        "program_budget": programs.program_budget(),
        "records": records,
    }


def main(argv=None) -> int:
    parser = script_parser(__doc__)
    parser.add_argument("--fits", type=int, default=1000)
    parser.add_argument("--every", type=int, default=50)
    parser.add_argument("--images", type=int, default=40)
    parser.add_argument(
        "--no-release",
        action="store_true",
        help="no program budget: show the growth the bound prevents",
    )
    parser.add_argument(
        "--methods", default=",".join(METHODS), help="comma-separated subset"
    )
    parser.add_argument("--suffix", default="", help="results file suffix")
    parser.add_argument("--out", default=None, help="JSON path (default: results/)")
    args = parser.parse_args(argv)
    use_device(args.device)
    methods = tuple(m for m in args.methods.split(",") if m)
    result = run(args.fits, args.every, args.images, not args.no_release, methods)
    given = " ".join(sys.argv[1:] if argv is None else argv)
    result["command"] = f"python -m benchmarks.scale.long_session {given}".strip()
    suffix = f"_{args.suffix}" if args.suffix else ""
    out = pathlib.Path(args.out or RESULTS / f"long_session{suffix}.json")
    write_json(out, result)
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
