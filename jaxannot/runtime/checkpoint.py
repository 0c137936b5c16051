"""Resumable fits: the state of every step loop saved atomically every ``every`` steps.

Every iterative fit of the library runs its steps through
:func:`~jaxannot.runtime.progress.run_steps`, whose step is a pure function of the
step index ``t`` (random keys come from ``jax.random.fold_in(key, t)``). Inside a
:func:`checkpointing` block each such loop is cut into slices of ``every`` steps and,
after each slice, its whole carry and the loss trace so far are written to
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
carry and a digest of the carry's initial values (so other data or another key do not
match).

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
import hashlib
import json
import os
import pathlib
from typing import Any

import numpy as np

import jax

from jaxannot.data.atomic import atomic_write

__all__ = ["CheckpointError", "Session", "checkpointing", "active_session"]

_FORMAT = "jaxannot.checkpoint"
_VERSION = 1


class CheckpointError(ValueError):
    """A checkpoint file that cannot be used for this fit."""


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
def checkpointing(directory: str | os.PathLike, *, every: int = 10, tag: str = ""):
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


def fingerprint(session: Session, run: int, carry, num_steps: int) -> str:
    """Digest of what a checkpoint must match to be used (module docstring)."""
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
    }
    h.update(json.dumps(head, sort_keys=True).encode())
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def save(path: pathlib.Path, digest: str, carry, losses, step: int) -> None:
    """Write the carry, the loss trace and the step reached, atomically."""
    arrays, impls, _ = _host_leaves(carry)
    meta = {
        "format": _FORMAT,
        "version": _VERSION,
        "fingerprint": digest,
        "step": int(step),
        "key_impls": impls,
    }
    entries = {f"leaf_{i}": a for i, a in enumerate(arrays)}
    entries["losses"] = np.asarray(losses)
    entries["__meta__"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    try:
        atomic_write(path, lambda fh: np.savez(fh, **entries))
    except OSError as err:  # a full disk, a read-only folder, ...
        raise CheckpointError(
            f"checkpoint {path} cannot be written ({err.strerror or err}); the last "
            "one written is kept: free the space and start the command again"
        ) from None


#: The entries of a checkpoint's header and their types (the format's and version's
#: are checked on their own).
_META_TYPES = {"fingerprint": str, "step": int, "key_impls": list}


def _check_meta(path: pathlib.Path, meta: dict) -> None:
    """:class:`CheckpointError` naming the header entry that is missing or of the
    wrong type (a damaged or hand-edited file)."""
    for key, kind in _META_TYPES.items():
        if key not in meta:
            raise CheckpointError(
                f"checkpoint {path}: its header has no `{key}` entry (damaged or not "
                "written by jaxannot); delete it to start the fit over"
            )
        value = meta[key]
        if not isinstance(value, kind) or isinstance(value, bool):
            raise CheckpointError(
                f"checkpoint {path}: its header's `{key}` is {value!r}, not "
                f"{'an' if kind is int else 'a'} {kind.__name__}; delete it to start "
                "the fit over"
            )


def load(path: pathlib.Path, digest: str, template) -> tuple[Any, np.ndarray, int]:
    """``(carry, losses, step)`` from ``path``; :class:`CheckpointError` when the
    file is unreadable or belongs to another fit."""
    try:
        with open(path, "rb") as fh, np.load(fh, allow_pickle=False) as archive:
            meta = json.loads(archive["__meta__"].tobytes().decode())
            impls = meta.get("key_impls") if isinstance(meta, dict) else None
            count = len(impls) if isinstance(impls, list) else 0
            arrays = [archive[f"leaf_{i}"] for i in range(count)]
            losses = archive["losses"]
    except Exception as err:  # zip, JSON or missing-entry errors alike
        raise CheckpointError(
            f"checkpoint {path} cannot be read ({type(err).__name__}: {err}); "
            "delete it to start the fit over"
        ) from None
    if (
        not isinstance(meta, dict)
        or meta.get("format") != _FORMAT
        or meta.get("version") != _VERSION
    ):
        raise CheckpointError(
            f"checkpoint {path}: not a jaxannot checkpoint v{_VERSION}"
        )
    _check_meta(path, meta)
    if meta.get("fingerprint") != digest:
        raise CheckpointError(
            f"checkpoint {path} was written by another fit (other method, settings, "
            "data or seed); use another --checkpoint folder or delete this one"
        )
    leaves, treedef = jax.tree.flatten(template)
    restored = []
    for a, impl, leaf in zip(arrays, meta["key_impls"], leaves, strict=True):
        restored.append(jax.random.wrap_key_data(a, impl=impl) if impl else a)
        if not impl and (
            a.shape != np.shape(leaf) or a.dtype != np.asarray(leaf).dtype
        ):
            raise CheckpointError(f"checkpoint {path}: a saved array has another shape")
    step = int(meta["step"])
    if not 0 <= step <= losses.shape[0]:
        raise CheckpointError(f"checkpoint {path}: step {step} out of range")
    return jax.tree.unflatten(treedef, restored), losses, step
