"""``--device`` for the benchmark scripts: pick JAX's platform, record it in the JSON.

Every script under ``benchmarks/<purpose>/`` takes ``--device``
(:func:`benchmarks.common.cli.script_parser` adds it); one that cannot honour it
everywhere (a peer library that runs on the CPU) says so in its help through the
``note``.

    from benchmarks.common.device import add_device_argument, device_record, use_device

    parser = argparse.ArgumentParser(...)  # a script: script_parser(__doc__)
    add_device_argument(parser)
    args = parser.parse_args(argv)
    use_device(args.device)  # before any JAX computation
    ...
    result["device"] = device_record()  # the record's machine block

A script that runs jaxannot in child processes passes the choice on with
``child_env(args.device)`` (the ``JAX_PLATFORMS`` variable of the child) and takes the
record from a child too (``child_device_record``), so that the parent never initialises
a backend (on a GPU it would hold memory the children need).

``python -m benchmarks.common.device [--device D]`` prints the record as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys

import jax

DEVICES = ("auto", "cpu", "gpu", "tpu")

# What ``jax.config.jax_platforms`` / ``JAX_PLATFORMS`` is set to for each choice.
# "gpu" is JAX's alias for cuda, rocm or oneapi, whichever is installed.
_PLATFORMS = {"cpu": "cpu", "gpu": "gpu", "tpu": "tpu"}

_JAX_SUGGESTION = " (set JAX_PLATFORMS='' to automatically choose an available backend)"


def add_device_argument(
    parser: argparse.ArgumentParser, note: str | None = None
) -> None:
    """Add ``--device {auto,cpu,gpu,tpu}`` (default ``auto``) to ``parser``.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The script's parser.
    note : str, optional
        What the choice does not reach (e.g. a peer library that runs on the CPU
        whatever it is), appended to the help.
    """
    text = (
        "JAX platform to run on: selects JAX's platform (jax_platforms) before "
        "any computation; auto (default) leaves JAX's default backend, i.e. the "
        "JAX_PLATFORMS environment variable or the best one available"
    )
    parser.add_argument(
        "--device",
        choices=DEVICES,
        default="auto",
        help=f"{text}; {note}" if note else text,
    )


def _available_platforms() -> str:
    """The platforms JAX finds on its own, after a failed initialisation."""
    try:
        import jax.extend.backend

        jax.extend.backend.clear_backends()
        jax.config.update("jax_platforms", None)
        return ", ".join(sorted({d.platform for d in jax.devices()}))
    except Exception:  # noqa: BLE001 - only for the error message
        return "unknown"


def use_device(name: str) -> None:
    """Make ``name`` JAX's platform; call before any JAX computation.

    ``auto`` changes nothing. Otherwise ``jax_platforms`` is set and the backend is
    initialised at once, so an unavailable platform stops the script here with a
    ``SystemExit`` message instead of a traceback later.
    """
    if name == "auto":
        return
    if name not in _PLATFORMS:
        raise SystemExit(f"--device {name}: not one of {', '.join(DEVICES)}")
    jax.config.update("jax_platforms", _PLATFORMS[name])
    try:
        jax.devices(name)
    except (RuntimeError, AssertionError) as err:
        # RuntimeError: JAX could not initialise the platform (no plugin, no
        # hardware); AssertionError: no backend at all came up.
        detail = str(err).replace(_JAX_SUGGESTION, "").strip()
        message = (
            f"--device {name}: no {name.upper()} backend "
            f"(jax.devices() lists: {_available_platforms()})"
        )
        if detail:
            message += f"\nJAX: {detail}"
        if name == "gpu":
            message += (
                "\n(JAX needs a visible GPU and its GPU plugin, e.g. jax[cuda12])"
            )
        raise SystemExit(message) from None
    if jax.default_backend() != name:
        # The backends were initialised before use_device, so the choice came too
        # late to change JAX's default platform.
        raise SystemExit(
            f"--device {name}: JAX was already initialised on "
            f"{jax.default_backend()}; call use_device before any JAX computation"
        )


def device_record() -> dict:
    """What the benchmark ran on, for its JSON (no host names or paths)."""
    devices = jax.devices()
    return {
        "backend": jax.default_backend(),
        "devices": [str(d) for d in devices],
        "device_kind": devices[0].device_kind,
        "jax": jax.__version__,
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
    }


def child_env(name: str, env: dict | None = None) -> dict:
    """Environment for a child process that runs JAX on the platform ``name``.

    ``auto`` leaves ``JAX_PLATFORMS`` as it is in ``env`` (default: ``os.environ``).
    """
    env = dict(os.environ if env is None else env)
    if name != "auto":
        env["JAX_PLATFORMS"] = _PLATFORMS[name]
    return env


def child_device_record(name: str) -> dict:
    """``device_record()`` of a child process run with ``child_env(name)``.

    Checks the platform the way ``use_device`` does (same ``SystemExit`` message)
    without initialising a backend in this process.
    """
    proc = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--device", name],
        env=child_env(name),
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(proc.stderr.strip() or f"--device {name}: the check failed")
    return json.loads(proc.stdout)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="Print the device record as JSON.")
    add_device_argument(parser)
    args = parser.parse_args(argv)
    use_device(args.device)
    print(json.dumps(device_record()))


if __name__ == "__main__":
    main()
