"""Mixture-of-unigrams MAP-EM throughput on a synthetic corpus of 1,000,000 images.

Each image has 15-25 tokens (~20) from a 1,000-word vocabulary, sampled from a
20-topic mixture of unigrams (numpy, in 100k-image blocks). The corpus is held as
padded token ids ``[images, 25]`` int32 (-1 = padding, ~100 MB) — never as a dense
images x vocab matrix (1M x 1000 float32 = 4 GB). It is fitted the way users fit it:
:class:`jaxannot.inference.VEM` on the declaration
:func:`jaxannot.methods.topic_models.mixture_of_unigrams.mixture_of_unigrams_tokens`
with its
closed-form M-step (``m_step=closed_form_m_step_tokens``); the E-step streams over
chunks of ``--chunk`` images. The images are split over ``--host-devices`` CPU
devices (default 2, one per core of the 2-core machine: XLA runs each device's
program on its own thread, where one device ran the gathers and scatters on one);
the script sets ``jax_num_cpu_devices`` before JAX starts its CPU backend, and the
JSON says how many (``host_devices``). ``--host-devices 1`` is the one-device fit.

Writes ``benchmarks/results/mixture_of_unigrams_1m.json``: seconds per EM iteration
(median of ``--repeats`` fits after the first), images x iterations per second, XLA's
compile time in the first fit (later fits of the same shapes compile nothing: counted),
the objective trace (checked non-decreasing),
the recovered-topic accuracy against the sampled truth, the process's peak RSS and
the machine's load average (a shared machine slows every timing).

    python -m benchmarks.scale.mixture_of_unigrams_1m            # 1M images, minutes
    python -m benchmarks.scale.mixture_of_unigrams_1m --images 20000 --iterations 3
"""

from __future__ import annotations

import json
import os
import platform
import resource
import shlex
import sys
import time

import numpy as np

import jax
import jax.numpy as jnp

from benchmarks.common.cli import script_parser
from benchmarks.common.device import device_record, use_device
from benchmarks.common.records import RESULTS, write_json
from jaxannot.inference import VEM
from jaxannot.methods.topic_models import mixture_of_unigrams as mu


def sample_tokens(rng, n, vocab, topics, min_len, max_len, block=100_000):
    beta = rng.dirichlet(np.full(vocab, 0.05), size=topics)
    cdf = np.cumsum(beta, axis=1)
    z = rng.integers(topics, size=n)
    tokens = np.full((n, max_len), -1, np.int32)
    for start in range(0, n, block):
        stop = min(n, start + block)
        zz = z[start:stop]
        u = rng.random((stop - start, max_len))
        tok = np.empty(u.shape, np.int32)
        for k in range(topics):
            rows = zz == k
            tok[rows] = np.minimum(np.searchsorted(cdf[k], u[rows]), vocab - 1)
        lengths = rng.integers(min_len, max_len + 1, size=stop - start)
        tok[np.arange(max_len)[None, :] >= lengths[:, None]] = -1
        tokens[start:stop] = tok
    return tokens, z


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def main(argv=None):
    p = script_parser(__doc__)
    p.add_argument("--images", type=int, default=1_000_000)
    p.add_argument("--vocab", type=int, default=1000)
    p.add_argument("--topics", type=int, default=20)
    p.add_argument("--iterations", type=int, default=10)
    p.add_argument(
        "--chunk", type=int, default=16384, help="images per E-step chunk (VEM)"
    )
    p.add_argument("--repeats", type=int, default=3, help="timed fits after the first")
    p.add_argument(
        "--host-devices",
        type=int,
        default=2,
        help="CPU devices the images are split over (jax_num_cpu_devices, set "
        "before JAX starts its CPU backend; 1: one device, as before)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--note", default="", help="free text stored in the JSON")
    p.add_argument(
        "--out",
        default=str(RESULTS / "mixture_of_unigrams_1m.json"),
    )
    args = p.parse_args(argv)
    jax.config.update("jax_num_cpu_devices", args.host_devices)
    use_device(args.device)
    devices = jax.devices()[: args.host_devices]

    load_at_start = list(os.getloadavg())
    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    tokens, z = sample_tokens(rng, args.images, args.vocab, args.topics, 15, 25)
    sample_s = time.perf_counter() - t0
    rss_after_data = peak_rss_mb()
    key = jax.random.key(args.seed)
    vem = VEM(
        mu.mixture_of_unigrams_tokens,
        "z",
        m_step=mu.closed_form_m_step_tokens,
        chunk_size=args.chunk,
        devices=devices if len(devices) > 1 else None,
    )
    data = (jnp.asarray(tokens),)
    kwargs = dict(num_topics=args.topics, vocab_sizes=(args.vocab,))

    def fit():
        result = vem.run(key, args.iterations, data, progress_bar=False, **kwargs)
        return jax.block_until_ready(result)

    # the first fit compiles (XLA's compile time summed from jax.monitoring);
    # the next ones, on the same shapes, compile nothing: each is timed
    compiles = []

    def on_event(name, seconds, **_):
        if name == "/jax/core/compile/backend_compile_duration":
            compiles.append(seconds)

    jax.monitoring.register_event_duration_secs_listener(on_event)
    t0 = time.perf_counter()
    fit()
    first_s = time.perf_counter() - t0
    compile_s, first_compiles = sum(compiles), len(compiles)
    timed = []
    for _ in range(args.repeats):
        result = None  # the last fit's posteriors freed before the next fit
        t0 = time.perf_counter()
        result = fit()
        timed.append(time.perf_counter() - t0)
    later_compiles = len(compiles) - first_compiles
    run_s = float(np.median(timed))
    objective = -np.asarray(result.losses)

    # quality: map each found topic to the sampled one (majority), then accuracy
    phi = vem.posteriors_for(result.params, data, **kwargs)
    phi_topic = np.asarray(jnp.argmax(phi, -1))
    table = np.zeros((args.topics, args.topics), np.int64)
    np.add.at(table, (phi_topic, z), 1)
    from scipy.optimize import linear_sum_assignment

    r, c = linear_sum_assignment(-table)
    accuracy = table[r, c].sum() / args.images
    diffs = np.diff(objective)
    result = dict(
        benchmark="mixture_of_unigrams_1m",
        images=args.images,
        vocab=args.vocab,
        topics=args.topics,
        tokens_total=int((tokens >= 0).sum()),
        mean_tokens_per_image=float((tokens >= 0).sum(1).mean()),
        iterations=args.iterations,
        chunk=args.chunk,
        host_devices=len(devices),
        sample_seconds=sample_s,
        first_call_seconds_incl_compile=first_s,
        compile_seconds=compile_s,
        compiles_in_first_fit=first_compiles,
        compiles_in_later_fits=later_compiles,
        seconds_of_each_fit=timed,
        seconds=run_s,
        seconds_per_iteration=run_s / args.iterations,
        seconds_per_iteration_note="the median fit (start, every EM iteration, "
        "transfers) divided by the iterations",
        images_iterations_per_second=args.images * args.iterations / run_s,
        objective=[float(x) for x in objective],
        objective_non_decreasing=bool(np.all(diffs >= -1e-5 * np.abs(objective[1:]))),
        topic_recovery_accuracy=float(accuracy),
        token_ids_mb=tokens.nbytes / 2**20,
        dense_counts_would_be_mb=args.images * args.vocab * 4 / 2**20,
        peak_rss_mb_after_sampling=rss_after_data,
        peak_rss_mb=peak_rss_mb(),
        jax=jax.__version__,
        device=device_record(),
        machine=platform.machine(),
        cpus=os.cpu_count(),
        load_average_1_5_15_min_at_start=load_at_start,
        load_average_1_5_15_min_at_end=list(os.getloadavg()),
        note=args.note,
        command=shlex.join(
            ["python", "benchmarks/scale/mixture_of_unigrams_1m.py"]
            + (sys.argv[1:] if argv is None else list(argv))
        ),
    )
    write_json(args.out, result)
    print(json.dumps({k: v for k, v in result.items() if k != "objective"}, indent=1))
    return result


if __name__ == "__main__":
    main()
