"""JAX's persistent compilation cache, on by default for the command line.

A first fit spends most of its time compiling (a ``VEM`` of a 2000-image mixture: a
handful of XLA programs, seconds each on two cores). JAX can keep compiled programs
on disk and load them in later processes; :func:`enable_compilation_cache` turns
that on for library users in one call, and ``jaxannot`` (the CLI) calls it at
start-up unless ``--no-compilation-cache`` or ``JAXANNOT_NO_COMPILATION_CACHE=1`` says
otherwise. ``benchmarks/scale/first_fit.py`` measures a first and a second process.

Where: ``JAXANNOT_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/jaxannot/jax`` (by
default ``~/.cache/jaxannot/jax``). Entries are keyed by JAX on the program, the
jax/jaxlib versions and the device, so a cache is never used for another program or
version; deleting the folder is always safe.
"""

from __future__ import annotations

import os
import pathlib

__all__ = ["enable_compilation_cache", "default_cache_dir", "cache_disabled"]

#: Environment variable that turns the CLI's cache off (any value but "", "0").
DISABLE_VARIABLE = "JAXANNOT_NO_COMPILATION_CACHE"
#: Environment variable naming the cache folder.
DIR_VARIABLE = "JAXANNOT_CACHE_DIR"


def default_cache_dir() -> pathlib.Path:
    """``JAXANNOT_CACHE_DIR``, else ``$XDG_CACHE_HOME/jaxannot/jax`` (``~/.cache``
    when ``XDG_CACHE_HOME`` is unset)."""
    if os.environ.get(DIR_VARIABLE):
        return pathlib.Path(os.environ[DIR_VARIABLE]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache"
    return pathlib.Path(base) / "jaxannot" / "jax"


def cache_disabled() -> bool:
    """Whether ``JAXANNOT_NO_COMPILATION_CACHE`` turns the CLI's cache off."""
    return os.environ.get(DISABLE_VARIABLE, "") not in ("", "0")


def enable_compilation_cache(
    directory: str | os.PathLike | None = None, *, min_compile_seconds: float = 0.0
) -> pathlib.Path:
    """Turn on JAX's persistent compilation cache in ``directory``.

    Parameters
    ----------
    directory : path, optional
        The cache folder (created if missing); default :func:`default_cache_dir`.
    min_compile_seconds : float
        Programs that compiled faster than this are not stored (JAX's default is
        1 s; 0 stores every program, which is what a first fit of many small
        programs needs).

    Returns
    -------
    pathlib.Path
        The folder in use.

    Raises
    ------
    ValueError
        The folder cannot be created or written, or its name is not UTF-8 (the
        message names it).
    """
    import jax

    path = pathlib.Path(directory) if directory is not None else default_cache_dir()
    try:  # JAX hands the name to XLA as UTF-8: a stray byte failed at the first compile
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(
            f"compilation cache folder {ascii(str(path))[1:-1]}: the name is not "
            f"UTF-8 text; set {DIR_VARIABLE} to a folder named in UTF-8 or "
            f"{DISABLE_VARIABLE}=1"
        ) from None
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ValueError(
            f"compilation cache folder {path}: {error.strerror or error}; set "
            f"{DIR_VARIABLE} to a writable folder or {DISABLE_VARIABLE}=1"
        ) from error
    if not os.access(path, os.W_OK):
        raise ValueError(
            f"compilation cache folder {path} is not writable; set {DIR_VARIABLE} to "
            f"a writable folder or {DISABLE_VARIABLE}=1"
        )
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", min_compile_seconds)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return path
