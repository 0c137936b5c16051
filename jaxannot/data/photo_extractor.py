"""A fitted photo featurizer, :class:`PhotoExtractor`: settings plus a codebook.

:meth:`PhotoExtractor.fit` learns the visual-word codebook (k-means of DAISY
descriptors, :func:`~jaxannot.data.image_features.fit_codebook`) and the scale of the
colour and texture rows on a set of photos; :meth:`PhotoExtractor.transform` turns
photos into the three views of :mod:`jaxannot.data.image_features`. The extractor is
saved as ``extractor.json`` (settings, scale) and ``extractor.npz`` (codebook), never
pickled, so new photos are featurized identically.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import pathlib
from collections.abc import Callable, Sequence

import numpy as np

from jaxannot.data.archive import read_archive, read_json_object, write_archive
from jaxannot.data.atomic import atomic_write
from jaxannot.data.bounded import as_float32
from jaxannot.data.errors import DataFormatError
from jaxannot.data.extractor_settings import ExtractorSettings
from jaxannot.data.image_features import (
    VIEW_KINDS,
    UnreadableImage,
    assign,
    describe,
    gabor_bank,
    read_image,
)

__all__ = ["PhotoExtractor"]

_FORMAT = "jaxannot.photo_extractor"
_VERSION = 1


@dataclasses.dataclass(frozen=True)
class PhotoExtractor:
    """Fitted featurizer: settings plus the visual-word codebook.

    Parameters
    ----------
    settings : ExtractorSettings
    codebook : array [words, D]
        k-means centres of the DAISY descriptors.
    scale : float
        L2 norm of every row of the colour and texture views: the median L2 norm of
        the visual-word counts of the photos the codebook was learned on, so the
        three views weigh alike in the concatenated features.
    """

    settings: ExtractorSettings
    codebook: np.ndarray
    scale: float = 1.0

    @property
    def view_dims(self) -> dict[str, int]:
        s = self.settings
        texture = sum(p + 2 for p, _ in s.lbp)
        texture += len(s.gabor_frequencies) * s.gabor_orientations
        return {
            "colour": s.hue_bins * s.saturation_bins * s.value_bins,
            "texture": texture,
            "visual_words": int(self.codebook.shape[0]),
        }

    def word_counts(self, descriptors: Sequence[np.ndarray]) -> np.ndarray:
        """Visual-word counts ``[n, words]`` of a list of ``[P, D]`` descriptors."""
        k = self.codebook.shape[0]
        counts = [
            np.bincount(assign(d, self.codebook), minlength=k) for d in descriptors
        ]
        return np.stack(counts).astype(np.float32)

    def views(
        self, colour: np.ndarray, texture: np.ndarray, words: np.ndarray
    ) -> dict[str, np.ndarray]:
        """The three views from :func:`describe`'s parts and :meth:`word_counts`.

        Each row of ``colour`` ``[n, C]`` and ``texture`` ``[n, T]`` is scaled to
        L2 norm ``scale``. Returns float32 ``{"colour", "texture", "visual_words"}``.
        """
        return {
            "colour": _rescale(colour, self.scale),
            "texture": _rescale(texture, self.scale),
            "visual_words": np.asarray(words, dtype=np.float32),
        }

    def transform(
        self,
        paths: Sequence[str | os.PathLike],
        *,
        on_error: Callable[[str, str], None] | None = None,
        progress: bool = False,
    ) -> tuple[dict[str, np.ndarray], list[int]]:
        """Featurize image files with this extractor.

        Parameters
        ----------
        paths : sequence of path-like
        on_error : callable(path, message), optional
            Called for an unreadable file, which is then skipped. Without it the
            first unreadable file raises :class:`UnreadableImage`.
        progress : bool
            Show a tqdm bar.

        Returns
        -------
        views : dict of float32 arrays ``[kept, dims]``
        kept : list of int
            Indices into ``paths`` of the photos featurized.
        """
        from tqdm.auto import tqdm

        bank = gabor_bank(self.settings)
        colour, texture, desc, kept = [], [], [], []
        for i, path in enumerate(tqdm(paths, desc="photos", disable=not progress)):
            try:
                rgb = read_image(path, self.settings.size)
            except UnreadableImage as err:
                if on_error is None:
                    raise
                on_error(os.fspath(path), str(err))
                continue
            c, t, d = describe(rgb, self.settings, bank)
            colour.append(c)
            texture.append(t)
            desc.append(d)
            kept.append(i)
        if not kept:
            dims = self.view_dims
            return {v: np.zeros((0, n), np.float32) for v, n in dims.items()}, kept
        words = self.word_counts(desc)
        return self.views(np.stack(colour), np.stack(texture), words), kept

    # ------------------------------------------------------------- save / load
    def save(self, folder: str | os.PathLike) -> None:
        """Write ``extractor.json`` and ``extractor.npz`` into ``folder`` (atomic)."""
        folder = pathlib.Path(folder)
        meta = {
            "format": _FORMAT,
            "version": _VERSION,
            "settings": self.settings.as_json(),
            "scale": self.scale,
            "view_kinds": VIEW_KINDS,
            "view_dims": self.view_dims,
        }
        write_archive(folder / "extractor.npz", {"codebook": self.codebook})
        text = json.dumps(meta, indent=2) + "\n"
        atomic_write(folder / "extractor.json", lambda fh: fh.write(text.encode()))

    @classmethod
    def load(cls, folder: str | os.PathLike) -> PhotoExtractor:
        """Read an extractor written by :meth:`save`.

        Raises
        ------
        FileNotFoundError
            ``folder`` lacks ``extractor.json`` or ``extractor.npz``.
        DataFormatError
            Either file is damaged or does not hold an extractor (the message names
            the file and the problem).
        """
        folder = pathlib.Path(folder)
        for name in ("extractor.json", "extractor.npz"):
            if not (folder / name).exists():
                raise FileNotFoundError(f"{folder}: no {name} (not a photo dataset?)")
        remedy = "build the dataset again with `jaxannot features`"
        path = folder / "extractor.json"
        meta = read_json_object(path, "photo extractor", remedy=remedy)
        if meta.get("format") != _FORMAT or meta.get("version") != _VERSION:
            raise DataFormatError(path, f"not a {_FORMAT} v{_VERSION}; {remedy}")
        try:
            settings = ExtractorSettings.from_json(meta.get("settings"))
            scale = meta.get("scale")
            if type(scale) not in (int, float) or not 0 < scale < math.inf:
                raise ValueError(f"scale {scale!r} is not a positive number")
        except ValueError as err:
            raise DataFormatError(path, f"{err}; {remedy}") from None
        npz = folder / "extractor.npz"
        codebook = read_archive(npz, "photo extractor", remedy=remedy).arrays.get(
            "codebook"
        )
        dims = settings.descriptor_dims
        if codebook is None or codebook.ndim != 2 or codebook.shape[1] != dims:
            found = "none" if codebook is None else f"shape {codebook.shape}"
            raise DataFormatError(
                npz,
                f"needs a [words, {dims}] 'codebook' array, found {found}; {remedy}",
            )
        if codebook.shape[0] < 1:
            raise DataFormatError(npz, f"empty codebook; {remedy}")
        # NaN, inf or beyond float32 (1e300 became inf, and annotated anyway)
        codebook = as_float32(codebook, npz, "its codebook", remedy=remedy)
        return cls(settings, codebook, float(scale))


def _rescale(rows, scale: float) -> np.ndarray:
    rows = np.asarray(rows, dtype=np.float64)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return (rows * (scale / np.maximum(norms, 1e-12))).astype(np.float32)
