"""Hostile checkpoint files (issue 44): read like saved models, never trusted.

Each file here once got past the checks: a FIFO named ``run-000.npz`` blocked the
fit forever; a small file declaring a huge member was inflated by ``np.load``; a key
leaf of another shape died with a ``TypeError`` (the key was rebuilt before the
shape check); NaN values, a missing leaf and a symbolic link loop were not refused
as the checkpoint's fault. Every error names the checkpoint file.
"""

import io
import json
import os
import signal
import struct
import time
import zipfile

import numpy as np
import pytest

import jax
import jax.numpy as jnp

from jaxannot.runtime import checkpoint
from jaxannot.runtime.progress import run_steps

CARRY = (jax.random.key(0), jnp.float32(0.0))


def _step(t, carry):
    key, total = carry
    return (key, total + jax.random.uniform(jax.random.fold_in(key, t))), total


def _resume(folder):
    with checkpoint.checkpointing(folder, every=5, tag="t"):
        return run_steps(_step, CARRY, 10, progress_bar=False)


def _saved(folder) -> dict:
    """A real checkpoint of the fit, as a dict of its entries."""
    _resume(folder)
    with np.load(folder / "run-000.npz") as archive:
        return {name: archive[name] for name in archive.files}


def _rewrite(folder, entries: dict, meta: dict | None = None) -> None:
    entries = dict(entries)
    if meta is not None:
        entries["__meta__"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    np.savez(folder / "run-000.npz", **entries)


def _meta(entries) -> dict:
    return json.loads(entries["__meta__"].tobytes().decode())


def _refused(folder, match: str) -> str:
    with pytest.raises(checkpoint.CheckpointError, match=match) as info:
        _resume(folder)
    assert str(folder / "run-000.npz") in str(info.value)
    return str(info.value)


def test_a_fifo_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "run-000.npz")

    def stuck(*_):
        raise TimeoutError("opening the FIFO blocked")

    previous = signal.signal(signal.SIGALRM, stuck)
    signal.alarm(5)
    try:
        _refused(tmp_path, "not a regular file")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_a_member_declared_huge_is_refused_before_inflating(tmp_path):
    """The zip directory declares 3 GiB for one entry of a small file: refused from
    the declared sizes (the bounded archive reader), in well under a second."""
    entries = _saved(tmp_path)
    buffer = io.BytesIO()
    np.savez(buffer, **entries)
    data = bytearray(buffer.getvalue())
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as archive:
        first = archive.infolist()[0].filename.encode()
    central = data.find(b"PK\x01\x02")  # the first central directory record
    while data[central + 46 : central + 46 + len(first)] != first:
        central = data.find(b"PK\x01\x02", central + 4)
    struct.pack_into("<I", data, central + 24, 3 * 2**30)  # uncompressed size
    (tmp_path / "run-000.npz").write_bytes(bytes(data))
    start = time.perf_counter()
    _refused(tmp_path, "decompress to")
    assert time.perf_counter() - start < 5


def test_a_key_leaf_of_another_shape_is_a_clear_error(tmp_path):
    entries = _saved(tmp_path)
    _rewrite(tmp_path, {**entries, "leaf_0": np.zeros(3, np.uint32)})
    assert "leaf_0" in _refused(tmp_path, "leaf_0 holds uint32")


def test_a_leaf_of_another_dtype_names_the_leaf(tmp_path):
    entries = _saved(tmp_path)
    _rewrite(tmp_path, {**entries, "leaf_1": np.float64(1.0)})
    _refused(tmp_path, "leaf_1 holds float64")


def test_values_that_are_not_finite_are_refused(tmp_path):
    entries = _saved(tmp_path)
    _rewrite(tmp_path, {**entries, "leaf_1": np.float32(np.nan)})
    _refused(tmp_path, "leaf_1 holds values that are not finite")


def test_a_missing_leaf_is_the_checkpoint_s_fault(tmp_path):
    entries = _saved(tmp_path)
    meta = _meta(entries)
    meta["key_impls"] = meta["key_impls"][:1]
    _rewrite(tmp_path, entries, meta)
    _refused(tmp_path, "holds 1 arrays, this fit's state has 2")


def test_a_symlink_loop_is_named_as_a_loop(tmp_path):
    (tmp_path / "run-000.npz").symlink_to("loop")
    (tmp_path / "loop").symlink_to("run-000.npz")
    message = _refused(tmp_path, "is a symbolic link loop")
    assert "free the space" not in message
    assert (tmp_path / "run-000.npz").is_symlink()  # not replaced by a file
