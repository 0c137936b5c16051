"""Resumable fits: the state of every step loop saved atomically every ``every`` steps.

Every iterative fit of the library runs its steps through
:func:`~jaxannot.runtime.progress.run_steps`, whose step is a pure function of the
step index ``t`` (random keys come from ``jax.random.fold_in(key, t)``). Inside a
:func:`checkpointing` block each such loop is cut into slices of ``every`` steps and,
after each slice, its whole carry and the steps' infos so far are written to
``DIRECTORY/run-NNN.npz`` (the ``NNN``-th loop of the fit: a fit may run several, e.g.
a plain EM warm start and then the regularized EM). A fit started again with the same
arguments finds the files, checks that they belong to this fit and resumes each loop
after its last saved slice; a loop that had finished is not run again. Because a step
depends only on ``t`` and the carry, the resumed fit computes exactly the same numbers
as an uninterrupted one (bit-identical on the CPU).

A file is refused with a :class:`CheckpointError` -- never silently used or
overwritten -- when it cannot be read (corrupt, truncated, not a checkpoint) or when
it was written by another fit: its fingerprint covers the ``tag`` the caller gives
(:func:`jaxannot.evaluation.evaluate` passes the method, its hyper-parameters, the seed
and the dataset), the loop's index and length, the structure, shapes and dtypes of the
carry and of the steps' infos and a digest of the carry's initial values (so other
data or another key do not match). A file of an older format (version 1, which
recorded one loss per step and a VEM fit's fault in its state) is refused as such.
A file is read like a saved model: ``stat`` first (a FIFO or a device is
refused without opening it, so nothing blocks), then the bounded archive reader
(:func:`jaxannot.data.archive.read_archive`: declared sizes bounded by the file's
size before anything is decompressed, no pickles), then every saved leaf is checked
against the fit's own state -- count, key implementation, shape, dtype, and
finiteness where the fit's own leaf is finite -- before any is rebuilt (a key
included). Every message names the file.

Each file is written to a temporary name in the same folder, flushed to disk and
renamed over the previous one, so a fit killed at any moment (even by ``SIGKILL``)
leaves the last complete checkpoint.

Examples
--------
>>> from jaxannot.runtime.checkpoint import checkpointing
>>> with checkpointing("fit-state", every=10, tag="my fit"):  # doctest: +SKIP
...     result = vem.run(key, 500, counts)
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import errno
import hashlib
import json
import os
import pathlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

import jax

from jaxannot.data.atomic import atomic_write
from jaxannot.data.write_targets import OverwritesInput
from jaxannot.runtime.checkpoint_files import (
    FORMAT,
    VERSION,
    CheckpointError,
    read_checked,
)

if TYPE_CHECKING:
    from jaxannot.types import ArrayTree

__all__ = ["CheckpointError", "Session", "checkpointing", "active_session"]


@dataclasses.dataclass
class Session:
    """The checkpoint settings of one fit and the loops it has run so far.

    Attributes
    ----------
    directory : pathlib.Path
    every : int
        Steps per slice (a checkpoint after each).
    tag : str
        Identifies the fit (part of every file's fingerprint).
    runs : int
        Step loops started so far in this fit.
    saved : int
        Checkpoint files written so far.
    resumed : list of (run, step)
        The loops that started from a saved state, and the step they resumed at.
    """

    directory: pathlib.Path
    every: int
    tag: str
    runs: int = 0
    saved: int = 0
    resumed: list = dataclasses.field(default_factory=list)

    def next_run(self) -> int:
        """Index of the loop that starts now (0, 1, ...)."""
        self.runs += 1
        return self.runs - 1

    def path(self, run: int) -> pathlib.Path:
        return self.directory / f"run-{run:03d}.npz"


_ACTIVE: contextvars.ContextVar[Session | None] = contextvars.ContextVar(
    "jaxannot_checkpoint", default=None
)


def active_session() -> Session | None:
    """The :class:`Session` of the enclosing :func:`checkpointing` block, if any."""
    return _ACTIVE.get()


@contextlib.contextmanager
def checkpointing(
    directory: str | os.PathLike, *, every: int = 10, tag: str = ""
) -> Iterator[Session]:
    """Make every step loop run inside the block resumable (module docstring).

    Parameters
    ----------
    directory : path
        Folder of the checkpoint files (created if missing). One folder per fit.
    every : int
        Save after every ``every`` steps (>= 1).
    tag : str
        Text that identifies the fit (method, settings, data); a file written under
        another tag is refused.

    Yields
    ------
    Session
        Counts the loops run, the files written and the loops resumed.
    """
    every = int(every)
    if every < 1:
        raise ValueError(f"checkpoint every must be >= 1 step, got {every}")
    directory = pathlib.Path(directory)
    if directory.exists() and not directory.is_dir():
        raise CheckpointError(f"checkpoint {directory}: exists and is not a folder")
    directory.mkdir(parents=True, exist_ok=True)
    session = Session(directory, every, str(tag))
    token = _ACTIVE.set(session)
    try:
        yield session
    finally:
        _ACTIVE.reset(token)


# ----------------------------------------------------------------- carry <-> arrays
def _is_key(leaf) -> bool:
    dtype = getattr(leaf, "dtype", None)
    return dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)


def _host_leaves(carry) -> tuple[list[np.ndarray], list[str | None], Any]:
    """Leaves as numpy arrays (keys as their raw data), each key's impl, treedef."""
    leaves, treedef = jax.tree.flatten(carry)
    arrays, impls = [], []
    for leaf in leaves:
        if _is_key(leaf):
            arrays.append(np.asarray(jax.random.key_data(leaf)))
            impls.append(str(jax.random.key_impl(leaf)))
        else:
            arrays.append(np.asarray(leaf))
            impls.append(None)
    return arrays, impls, treedef


def fingerprint(
    session: Session, run: int, carry: ArrayTree, num_steps: int, trace: Any
) -> str:
    """Digest of what a checkpoint must match to be used (module docstring);
    ``trace`` holds the shapes of the steps' infos (``jax.ShapeDtypeStruct``)."""
    arrays, impls, treedef = _host_leaves(carry)
    h = hashlib.sha256()
    head = {
        "tag": session.tag,
        "run": run,
        "num_steps": int(num_steps),
        "treedef": str(treedef),
        "leaves": [
            [list(a.shape), str(a.dtype), k] for a, k in zip(arrays, impls, strict=True)
        ],
        "trace": str(jax.tree.structure(trace)),
        "infos": [[list(s.shape), str(s.dtype)] for s in jax.tree.leaves(trace)],
    }
    h.update(json.dumps(head, sort_keys=True).encode())
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def save(
    path: pathlib.Path, digest: str, carry: ArrayTree, trace: Any, step: int
) -> None:
    """Write the carry, the steps' infos (a pytree of ``[num_steps, ...]`` arrays)
    and the step reached, atomically."""
    arrays, impls, _ = _host_leaves(carry)
    meta = {
        "format": FORMAT,
        "version": VERSION,
        "fingerprint": digest,
        "step": int(step),
        "key_impls": impls,
    }
    entries = {f"leaf_{i}": a for i, a in enumerate(arrays)}
    entries.update(
        {f"info_{i}": np.asarray(a) for i, a in enumerate(jax.tree.leaves(trace))}
    )
    entries["__meta__"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    try:
        atomic_write(path, lambda fh: np.savez(fh, **entries))
    except OverwritesInput as err:
        raise CheckpointError(f"checkpoint {err}") from None
    except OSError as err:  # a full disk, a read-only folder, ...
        if err.errno == errno.ELOOP:
            raise CheckpointError(
                f"checkpoint {path} is a symbolic link loop; delete it to start the "
                "fit over"
            ) from None
        raise CheckpointError(
            f"checkpoint {path} cannot be written ({err.strerror or err}); the last "
            "one written is kept: free the space and start the command again"
        ) from None


def _expected(leaf) -> tuple[tuple[int, ...], np.dtype, str | None]:
    """Shape, dtype and key implementation a leaf of the fit's state saves as."""
    if _is_key(leaf):
        data = jax.random.key_data(leaf)
        return tuple(data.shape), np.dtype(data.dtype), str(jax.random.key_impl(leaf))
    value = np.asarray(leaf)
    return value.shape, value.dtype, None


def _check_leaves(path: pathlib.Path, meta: dict, arrays: dict, template) -> list:
    """The saved leaves, each checked against the fit's own state (count, key
    implementation, shape, dtype, finiteness where its own leaf is finite) before
    any is rebuilt; :class:`CheckpointError` naming the file and the leaf."""
    leaves = jax.tree.leaves(template)
    impls = meta["key_impls"]
    if len(impls) != len(leaves):
        raise CheckpointError(
            f"checkpoint {path} holds {len(impls)} arrays, this fit's state has "
            f"{len(leaves)}; delete it to start the fit over"
        )
    saved = []
    for i, (impl, leaf) in enumerate(zip(impls, leaves, strict=True)):
        name = f"leaf_{i}"
        if name not in arrays:
            raise CheckpointError(
                f"checkpoint {path} has no {name}; delete it to start the fit over"
            )
        a = arrays[name]
        shape, dtype, want_impl = _expected(leaf)
        problem = None
        if impl != want_impl:
            problem = f"key implementation {impl!r}, this fit's is {want_impl!r}"
        elif a.shape != shape or a.dtype != dtype:
            problem = (
                f"{a.dtype}{list(a.shape)}, this fit's state holds {dtype}{list(shape)}"
            )
        elif (
            a.dtype.kind == "f"
            and not np.isfinite(a).all()
            and np.isfinite(np.asarray(leaf)).all()
        ):
            problem = "values that are not finite (NaN or infinite)"
        if problem is not None:
            raise CheckpointError(
                f"checkpoint {path}: its {name} holds {problem}; delete it to start "
                "the fit over"
            )
        saved.append(a)
    return saved


def _check_trace(path: pathlib.Path, arrays: dict, trace: Any) -> Any:
    """The saved infos, each checked against its shape ``trace`` (a pytree of
    ``jax.ShapeDtypeStruct``); :class:`CheckpointError` naming the file and the
    entry."""
    leaves, treedef = jax.tree.flatten(trace)
    saved = []
    for i, want in enumerate(leaves):
        a = arrays.get(f"info_{i}")
        if a is None or a.shape != want.shape or a.dtype != want.dtype:
            held = "is missing" if a is None else f"holds {a.dtype}{list(a.shape)}"
            raise CheckpointError(
                f"checkpoint {path}: its info_{i} {held}, this fit's steps record "
                f"{np.dtype(want.dtype)}{list(want.shape)}; delete it to start the "
                "fit over"
            )
        saved.append(a)
    return jax.tree.unflatten(treedef, saved)


def load(
    path: pathlib.Path, digest: str, template: ArrayTree, trace: Any
) -> tuple[Any, Any, int]:
    """``(carry, infos, step)`` from ``path``; :class:`CheckpointError` (naming
    ``path``) when the file is not a regular file, unreadable, over the archive
    bounds, of an older format, belongs to another fit, or holds a leaf whose
    shape, dtype, key or finiteness does not match the fit's own state
    ``template``, or infos not of the shapes ``trace`` (a pytree of
    ``jax.ShapeDtypeStruct`` ``[num_steps, ...]``) gives."""
    path = pathlib.Path(path)
    meta, arrays = read_checked(path)
    if meta.get("fingerprint") != digest:
        raise CheckpointError(
            f"checkpoint {path} was written by another fit (other method, settings, "
            "data or seed); use another --checkpoint folder or delete this one"
        )
    saved = _check_leaves(path, meta, arrays, template)
    infos = _check_trace(path, arrays, trace)
    step = int(meta["step"])
    num_steps = jax.tree.leaves(trace)[0].shape[0] if jax.tree.leaves(trace) else step
    if not 0 <= step <= num_steps:
        raise CheckpointError(f"checkpoint {path}: step {step} out of range")
    leaves, treedef = jax.tree.flatten(template)
    restored = [
        jax.random.wrap_key_data(a, impl=impl) if impl else a
        for a, impl in zip(saved, meta["key_impls"], strict=True)
    ]
    return jax.tree.unflatten(treedef, restored), infos, step
