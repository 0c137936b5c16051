"""Resumable fits: a fit killed with SIGKILL and started again with the same call
resumes from its checkpoint and ends bit-identical to an uninterrupted fit; foreign,
mismatched and corrupt checkpoints are refused."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from typing import NamedTuple

import numpy as np
import pytest

import jax
import jax.numpy as jnp

from jaxannot.runtime import checkpoint
from jaxannot.runtime.progress import run_steps

#: the child's main-loop iterations: the kill comes at its first checkpoint (step 1
#: or 2 in practice), so the rest only has to run long enough to be killed midway
#: (20: the resumed and the plain fit run 18 and 20 steps, not 58 and 60)
ITERATIONS = 20

# a child process: lap-mix-unigram (10 topics, not the default 100: what is checked
# is the resumption, and the test's CPU went 24.3 -> 18.8 s) through the evaluation
# driver, its fitted arrays written to OUT (np.savez) when the fit ends; with a
# third argument PLAIN it then fits again without checkpoints in the same process
# (the uninterrupted reference: one process fewer, and the compiled programs they
# share compiled once), after a marker line on stderr
CHILD = textwrap.dedent(
    """
    import logging
    import sys
    import numpy as np
    import jax
    from jaxannot.data import make_task
    from jaxannot.data.synthetic import make_synthetic
    from jaxannot.evaluation import evaluate

    out, folder, plain = (sys.argv[1:] + [None])[:3]
    logging.basicConfig(level=logging.INFO)  # the driver logs what it resumed
    corpus = make_synthetic(seed=0, num_images=150)
    task = make_task(corpus, None, protocol="transductive", seed=0)

    def fit(out, folder):
        result = evaluate(
            "lap-mix-unigram", task, seed=3,
            hyper={"iterations": ITERATIONS, "warm_start": 5, "topics": 10},
            checkpoint=folder, checkpoint_every=1,
        )
        leaves = jax.tree.leaves(result.fitted.params)
        np.savez(out, *[np.asarray(x) for x in leaves])

    fit(out, folder)
    if plain is not None:
        print(MARKER, file=sys.stderr, flush=True)
        fit(plain, None)
    """
)
#: what the child writes to stderr between its resumed fit and its plain one
MARKER = "--- the fit without checkpoints ---"


def _child(tmp_path, out, folder, plain=None):
    script = tmp_path / "child.py"
    code = CHILD.replace("ITERATIONS", str(ITERATIONS))
    script.write_text(code.replace("MARKER", repr(MARKER)))
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, str(script), str(out), str(folder)]
        + ([] if plain is None else [str(plain)]),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _arrays(path):
    with np.load(path) as archive:
        return [archive[k] for k in sorted(archive.files, key=lambda k: int(k[4:]))]


def _saved_step(path) -> int:
    with np.load(path) as archive:
        return json.loads(archive["__meta__"].tobytes().decode())["step"]


def test_killed_fit_resumes_bit_identical(tmp_path):
    folder = tmp_path / "state"
    main_loop = folder / "run-001.npz"  # run-000 is the plain-EM warm start

    killed = _child(tmp_path, tmp_path / "never.npz", folder)
    deadline = time.monotonic() + 600
    while not main_loop.exists():
        if killed.poll() is not None:
            pytest.fail(killed.communicate()[1][-2000:])
        assert time.monotonic() < deadline, "no checkpoint written in 10 minutes"
        time.sleep(0.01)
    killed.send_signal(signal.SIGKILL)
    killed.communicate()
    assert killed.returncode == -signal.SIGKILL
    assert not (tmp_path / "never.npz").exists()
    stopped_at = _saved_step(main_loop)
    assert 0 < stopped_at < ITERATIONS  # killed in the middle of the main loop

    # the same call again, then (same process) the fit without checkpoints at all
    resumed = _child(tmp_path, tmp_path / "resumed.npz", folder, tmp_path / "plain.npz")
    _, err = resumed.communicate(timeout=900)
    assert resumed.returncode == 0, err[-2000:]
    assert err.count(MARKER) == 1, err[-2000:]
    errors = err.split(MARKER)
    # the second run really started from the killed run's last checkpoint
    assert f"step loop 1 resumed at step {stopped_at}" in errors[0], errors[0][-2000:]
    assert "resumed" not in errors[1]
    assert _saved_step(main_loop) == ITERATIONS
    a, b = _arrays(tmp_path / "resumed.npz"), _arrays(tmp_path / "plain.npz")
    assert len(a) == len(b) > 0
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)  # bit-identical


def _counting_step(t, carry):
    key, total = carry
    draw = jax.random.uniform(jax.random.fold_in(key, t))
    return (key, total + draw), total


def test_resume_from_a_partial_checkpoint_equals_one_run(tmp_path):
    carry = (jax.random.key(0), jnp.float32(0.0))
    whole, losses = run_steps(_counting_step, carry, 10, progress_bar=False)
    with checkpoint.checkpointing(tmp_path, every=4, tag="t") as session:
        run_steps(_counting_step, carry, 10, progress_bar=False)
    assert session.saved == 3 and session.runs == 1
    # roll the file back to its state after 4 steps: a fit killed there
    path = session.path(0)
    infos = jax.ShapeDtypeStruct((10,), jnp.float32)  # one loss per step
    digest = checkpoint.fingerprint(session, 0, carry, 10, infos)
    partial, partial_losses = run_steps(_counting_step, carry, 4, progress_bar=False)
    padded = np.concatenate([partial_losses, np.full(6, np.nan, np.float32)])
    checkpoint.save(path, digest, partial, padded, 4)
    with checkpoint.checkpointing(tmp_path, every=4, tag="t") as session:
        again, again_losses = run_steps(_counting_step, carry, 10, progress_bar=False)
    assert session.resumed == [(0, 4)]
    assert float(again[1]) == float(whole[1])
    np.testing.assert_array_equal(again_losses, losses)
    assert (
        jax.random.key_data(again[0]).tolist() == jax.random.key_data(whole[0]).tolist()
    )


@pytest.mark.parametrize(
    "change",
    [
        {"tag": "other"},
        {"steps": 11},
        {"carry": (jax.random.key(1), jnp.float32(0.0))},
    ],
)
def test_checkpoint_of_another_fit_is_refused(tmp_path, change):
    carry = (jax.random.key(0), jnp.float32(0.0))
    with checkpoint.checkpointing(tmp_path, every=5, tag="t"):
        run_steps(_counting_step, carry, 10, progress_bar=False)
    before = (tmp_path / "run-000.npz").read_bytes()
    with pytest.raises(checkpoint.CheckpointError, match="another fit"):
        with checkpoint.checkpointing(tmp_path, every=5, tag=change.get("tag", "t")):
            run_steps(
                _counting_step,
                change.get("carry", carry),
                change.get("steps", 10),
                progress_bar=False,
            )
    assert (tmp_path / "run-000.npz").read_bytes() == before  # not overwritten


class _Info(NamedTuple):
    loss: jax.Array
    draws: jax.Array


def _info_step(t, carry):
    key, total = carry
    draw = jax.random.uniform(jax.random.fold_in(key, t), (2,))
    return (key, total + draw.sum()), _Info(-total, (draw > 0.5).astype(jnp.int32))


def test_a_resumed_fit_records_the_infos_of_one_run(tmp_path):
    carry = (jax.random.key(0), jnp.float32(0.0))
    whole, infos = run_steps(_info_step, carry, 10, progress_bar=False)
    with checkpoint.checkpointing(tmp_path, every=4, tag="t") as session:
        run_steps(_info_step, carry, 10, progress_bar=False)
    path = session.path(0)
    with np.load(path) as archive:
        entries = {name: archive[name] for name in archive.files}
    # rolled back to its state after 4 steps (a fit killed there): later infos unset
    meta = json.loads(entries["__meta__"].tobytes().decode())
    meta["step"] = 4
    partial, _ = run_steps(_info_step, carry, 4, progress_bar=False)
    entries["leaf_1"] = np.asarray(partial[1])
    entries["info_0"][4:] = np.nan
    entries["info_1"][4:] = 0
    entries["__meta__"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    np.savez(path, **entries)
    with checkpoint.checkpointing(tmp_path, every=4, tag="t") as session:
        again, again_infos = run_steps(_info_step, carry, 10, progress_bar=False)
    assert session.resumed == [(0, 4)]
    assert type(again_infos) is _Info and again_infos.draws.shape == (10, 2)
    assert float(again[1]) == float(whole[1])
    for got, want in zip(again_infos, infos, strict=True):
        np.testing.assert_array_equal(got, want)


def test_a_checkpoint_of_the_first_format_is_refused_by_name(tmp_path):
    carry = (jax.random.key(0), jnp.float32(0.0))
    with checkpoint.checkpointing(tmp_path, every=5, tag="t"):
        run_steps(_counting_step, carry, 10, progress_bar=False)
    path = tmp_path / "run-000.npz"
    with np.load(path) as archive:
        entries = {name: archive[name] for name in archive.files}
    meta = json.loads(entries.pop("__meta__").tobytes().decode())
    meta["version"] = 1  # one loss per step, a VEM fit's fault in its state
    entries["losses"] = entries.pop("info_0")
    entries["__meta__"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    np.savez(path, **entries)
    with pytest.raises(checkpoint.CheckpointError) as err:
        with checkpoint.checkpointing(tmp_path, every=5, tag="t"):
            run_steps(_counting_step, carry, 10, progress_bar=False)
    assert str(err.value).startswith(f"checkpoint {path} was written by an older")
    assert "delete it to start the fit over" in str(err.value)


def test_corrupt_checkpoint_is_refused_by_name(tmp_path):
    (tmp_path / "run-000.npz").write_bytes(b"PK\x03\x04 truncated")
    carry = (jax.random.key(0), jnp.float32(0.0))
    with pytest.raises(checkpoint.CheckpointError, match="run-000.npz cannot be read"):
        with checkpoint.checkpointing(tmp_path, every=5):
            run_steps(_counting_step, carry, 10, progress_bar=False)


def test_bad_settings_are_refused(tmp_path):
    with pytest.raises(ValueError, match="every must be >= 1"):
        with checkpoint.checkpointing(tmp_path, every=0):
            pass
    afile = tmp_path / "a-file"
    afile.write_text("x")
    with pytest.raises(checkpoint.CheckpointError, match="not a folder"):
        with checkpoint.checkpointing(afile):
            pass
