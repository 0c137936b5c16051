"""Two local processes (``jax.distributed``, gloo CPU collectives) fit the declared
mixture of unigrams with VEM split over both processes' devices, and get the fit of
one process: the same objective trace, globals and posteriors."""

import socket
import subprocess
import sys
import textwrap

import numpy as np

import jax

from jaxannot.inference import VEM
from jaxannot.methods.topic_models import mixture_of_unigrams as mu

WORKER = textwrap.dedent(
    """
    import sys
    import numpy as np
    import jax
    from jaxannot.runtime import sharding
    sharding.join(sys.argv[1], 2, int(sys.argv[2]))
    from jaxannot.inference import VEM
    from jaxannot.inference.vem import run as vem_module
    from jaxannot.methods.topic_models import mixture_of_unigrams as mu

    loops = []  # the data the fit's step loop reads: (model arrays, E-step arrays)
    real = vem_module.run_steps
    def recording(step, carry, num_steps, **kw):
        loops.append(kw["data"])
        return real(step, carry, num_steps, **kw)
    vem_module.run_steps = recording

    counts = np.random.default_rng(0).poisson(1.0, size=(31, 12)).astype(np.float32)
    assert jax.process_count() == 2 and jax.device_count() == 2
    closed = mu.closed_form_m_step
    vem = VEM(mu.mixture_of_unigrams, "z", m_step=closed, devices=jax.devices())
    res = vem.run(jax.random.key(0), 12, (counts,), num_topics=3, progress_bar=False)
    data = loops[-1][0][0]  # the counts as the loop holds them
    held = [  # the rows of the (padded) image axis held by this process
        (*s.index[0].indices(data.shape[0])[:2], s.device.process_index)
        for s in data.addressable_shards
    ]
    np.savez(
        sys.argv[3], losses=res.losses, phi=np.asarray(res.posteriors),
        pi=np.asarray(sharding.gather(res.params["pi"])),
        beta=np.asarray(sharding.gather(res.params["beta_0"])),
        held=np.asarray(held), rows=data.shape[0],
    )
    """
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_workers(script, tmp_path, env) -> None:
    """Start the two workers on a free coordinator port; a port taken by another
    process between finding it and the coordinator binding it (the other test
    worker's processes run meanwhile) is retried on a new port, twice at most."""
    for attempt in range(3):
        address = f"127.0.0.1:{_free_port()}"
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    str(script),
                    address,
                    str(rank),
                    str(tmp_path / f"{rank}"),
                ],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for rank in (0, 1)
        ]
        errors = []
        for proc in procs:
            try:
                _, err = proc.communicate(timeout=600)
            except subprocess.TimeoutExpired:
                for other in procs:
                    other.kill()
                raise
            errors.append((proc.returncode, err))
        if all(code == 0 for code, _ in errors):
            return
        taken = any("ddress already in use" in err for _, err in errors)
        if not taken or attempt == 2:
            code, err = next((c, e) for c, e in errors if c != 0)
            raise AssertionError(f"a worker exited {code}: {err[-3000:]}")


def test_two_processes_fit_as_one(tmp_path, fast_compile):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    # one device a process; both compile cheaply (the same flags, the same programs:
    # what is checked is what the split fit computes, not how fast it runs)
    env = {"OPENBLAS_NUM_THREADS": "1", "XLA_FLAGS": fast_compile, "PATH": ""}
    _run_workers(script, tmp_path, env)
    counts = np.random.default_rng(0).poisson(1.0, size=(31, 12)).astype(np.float32)
    one = VEM(
        mu.mixture_of_unigrams,
        "z",
        m_step=mu.closed_form_m_step,
        devices=jax.devices()[:1],
    ).run(jax.random.key(0), 12, (counts,), num_topics=3, progress_bar=False)
    ranks = [np.load(tmp_path / f"{rank}.npz") for rank in (0, 1)]
    # each process held half of the (padded to 32) images, on its own device
    for rank in (0, 1):
        assert int(ranks[rank]["rows"]) == 32
        np.testing.assert_array_equal(
            ranks[rank]["held"], [[16 * rank, 16 * rank + 16, rank]]
        )
    for key in ("losses", "phi", "pi", "beta"):  # both processes hold the same fit
        np.testing.assert_array_equal(ranks[0][key], ranks[1][key])
    got = ranks[0]
    np.testing.assert_allclose(got["losses"], one.losses, rtol=1e-5)
    np.testing.assert_allclose(got["pi"], one.params["pi"], rtol=1e-5)
    np.testing.assert_allclose(got["beta"], one.params["beta_0"], rtol=1e-5)
    np.testing.assert_allclose(got["phi"], one.posteriors, rtol=1e-4, atol=1e-6)
