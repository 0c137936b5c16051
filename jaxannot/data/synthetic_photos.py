"""Synthetic photos with known tags, for tests and demos of ``jaxannot features``.

Every photo has one colour tag (``red``, ``green``, ``blue``: the dominant hue) and one
pattern tag (``stripes``: a square-wave grating of random orientation and period;
``plain``: a slow shading). Pixel noise and a random tint keep photos distinct.
"""

from __future__ import annotations

import os
import pathlib

import numpy as np

__all__ = ["COLOURS", "PATTERNS", "write_synthetic_photos"]

COLOURS = {
    "red": (0.8, 0.15, 0.12),
    "green": (0.15, 0.7, 0.2),
    "blue": (0.12, 0.2, 0.8),
}
PATTERNS = ("stripes", "plain")


def write_synthetic_photos(
    folder: str | os.PathLike, *, per_kind: int = 4, size: int = 64, seed: int = 0
) -> dict[str, list[str]]:
    """Write ``per_kind`` photos of every (colour, pattern) pair into ``folder``.

    Photos alternate between JPEG and PNG files. Returns ``{file name: [colour,
    pattern]}``.
    """
    from PIL import Image

    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size] / size
    tags: dict[str, list[str]] = {}
    for colour, base in COLOURS.items():
        for pattern in PATTERNS:
            for _ in range(per_kind):
                theta = rng.uniform(0, np.pi)
                along = xx * np.cos(theta) + yy * np.sin(theta)
                if pattern == "stripes":
                    wave = np.sign(np.sin(2 * np.pi * along / rng.uniform(0.08, 0.15)))
                    shade = 0.55 + 0.45 * wave
                else:
                    shade = 0.75 + 0.2 * np.cos(2 * np.pi * along * rng.uniform(0.5, 1))
                tint = np.asarray(base) + rng.uniform(-0.08, 0.08, 3)
                pixels = shade[..., None] * tint + rng.normal(0, 0.03, (size, size, 3))
                image = (np.clip(pixels, 0, 1) * 255).astype(np.uint8)
                name = f"photo{len(tags):03d}.{'png' if len(tags) % 2 else 'jpg'}"
                Image.fromarray(image).save(folder / name)
                tags[name] = [colour, pattern]
    return tags
