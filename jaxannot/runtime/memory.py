"""The default device's memory, and a clear refusal of an array that cannot fit.

XLA's CPU client hangs, rather than raising, when a large allocation inside a
compiled computation fails; the fits whose memory grows with the square of a
hyper-parameter (ALE's histogram bins, EMML's VReps) check it first.
"""

from __future__ import annotations

import math
import os

import jax

__all__ = ["device_memory_bytes", "check_square_fits"]


def device_memory_bytes() -> int:
    """Memory of the default device: its ``bytes_limit`` where the backend reports
    one (GPU, TPU), else the host's physical memory (CPU)."""
    stats = jax.devices()[0].memory_stats() or {}
    if stats.get("bytes_limit"):
        return int(stats["bytes_limit"])
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def check_square_fits(
    count: int, bytes_per_pair: int, what: str, advice: str = ""
) -> None:
    """``ValueError`` when ``bytes_per_pair * count**2`` bytes exceed half the
    device's memory, naming the largest ``count`` that fits.

    Parameters
    ----------
    count : int
        The size whose square the memory grows with (bins, VReps).
    bytes_per_pair : int
        Peak bytes per ``count x count`` entry (e.g. 16 for four float32 arrays).
    what : str
        The hyper-parameter, e.g. ``"vreps"``.
    advice : str
        Appended to the message, e.g. ``" (the paper uses 50)"``.
    """
    have = device_memory_bytes() // 2
    need = bytes_per_pair * count * count
    if need > have:
        most = math.isqrt(have // bytes_per_pair)
        raise ValueError(
            f"{what} = {count} needs {need / 2**30:.1f} GiB ({bytes_per_pair} B per "
            f"pair), more than half the {2 * have / 2**30:.1f} GiB of memory here: "
            f"use at most {most}{advice}"
        )
