"""Features of photos: colour histogram, texture, and visual words over a codebook.

A :class:`PhotoExtractor` turns an image file into three feature views:

``colour``
    Joint HSV histogram (``hue_bins x saturation_bins x value_bins`` cells) of the
    photo's pixels (Swain & Ballard 1991, colour indexing).
``texture``
    Uniform local binary pattern histograms (Ojala, Pietikäinen & Mäenpää 2002) at
    each ``(points, radius)`` of ``lbp``, each summing to 1, then the mean magnitude
    of the responses to a bank of Gabor filters (``gabor_frequencies`` x
    ``gabor_orientations``; Manjunath & Ma 1996) times ``GABOR_GAIN``.
``visual_words``
    Bag of visual words (Sivic & Zisserman 2003; Csurka et al. 2004): DAISY
    descriptors (Tola, Lepetit & Fua 2010) on a dense grid of the grey image, each
    assigned to its nearest centre of a k-means codebook learned on the photos;
    the view holds the count of each word.

Every photo is first resized to ``size x size`` pixels (aspect ratio not kept), so
every photo has the same number ``P`` of grid descriptors and its word counts sum to
``P``. Every row of the colour and texture views is scaled to the L2 norm ``scale``,
the median L2 norm of the word-count rows of the photos the codebook was learned on,
so that the three views weigh alike when a method concatenates them
(``Corpus.features()``, as knn and tagprop do by default). The extractor is saved as
``extractor.json`` (settings, scale) and ``extractor.npz`` (codebook), never pickled,
so new photos are featurized identically.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import pathlib
import stat
import warnings
from collections.abc import Callable

import numpy as np

from jaxannot.data.archive import read_archive, read_json_object, write_archive
from jaxannot.data.atomic import atomic_write
from jaxannot.data.errors import DataFormatError, printable

__all__ = [
    "ExtractorSettings",
    "PhotoExtractor",
    "UnreadableImage",
    "read_image",
    "fit_codebook",
    "VIEW_KINDS",
]

VIEW_KINDS = {"colour": "real", "texture": "real", "visual_words": "bag"}
GABOR_GAIN = 10.0  # mean |response| of a [0, 1] grey image, to the scale of LBP bins
_FORMAT = "jaxannot.photo_extractor"
_VERSION = 1

log = logging.getLogger(__name__)


#: Inclusive ``(low, high)`` of each integer setting of :class:`ExtractorSettings`.
SETTING_BOUNDS = {
    "size": (1, 640),
    "hue_bins": (1, 64),
    "saturation_bins": (1, 64),
    "value_bins": (1, 64),
    "gabor_orientations": (0, 16),
    "daisy_step": (1, 640),
    "daisy_radius": (1, 319),
    "daisy_rings": (1, 8),
    "daisy_histograms": (1, 16),
    "daisy_orientations": (1, 32),
    "codebook_size": (1, 10_000),
    "max_descriptors": (1, 1_000_000),
    "kmeans_iterations": (0, 1000),
    "seed": (0, 2**63 - 1),
}
MAX_BANK = 4  # LBP (points, radius) pairs; Gabor frequencies
LBP_POINTS = (4, 32)
LBP_RADIUS = (1, 32)
GABOR_FREQUENCIES = (0.05, 0.5)
MAX_COLOUR_CELLS = 4096
MAX_DESCRIPTOR_VALUES = 2**20
MAX_KMEANS_DISTANCES = 2**28


def _check_range(name: str, value, low, high) -> None:
    if not low <= value <= high:
        raise ValueError(
            f"extractor setting {name} must be in [{low}, {high}], got {value!r}"
        )


def _check_bank(name: str, bank, least: int) -> None:
    if not least <= len(bank) <= MAX_BANK:
        raise ValueError(
            f"extractor setting {name} must hold {least} to {MAX_BANK} entries, got "
            f"{len(bank)}"
        )


class UnreadableImage(ValueError):
    """A file that Pillow cannot decode as an image.

    Attributes
    ----------
    reason : str
        Why, without the file name (the message names the file first).
    """

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = message if reason is None else reason

    @classmethod
    def of(cls, name: str, reason: str) -> UnreadableImage:
        """``name: not a readable image (reason)``; ``name`` already printable."""
        text = f"not a readable image ({reason})"
        return cls(f"{name}: {text}", text)


@dataclasses.dataclass(frozen=True)
class ExtractorSettings:
    """How photos are featurized (everything but the learned codebook).

    Parameters
    ----------
    size : int
        Photos are resized to ``size x size`` pixels before any feature.
    hue_bins, saturation_bins, value_bins : int
        Cells of the joint HSV colour histogram.
    lbp : tuple of (int, int)
        ``(points, radius)`` of each uniform LBP histogram (``points + 2`` bins each).
    gabor_frequencies : tuple of float
        Spatial frequencies (cycles per pixel) of the Gabor bank.
    gabor_orientations : int
        Orientations of the Gabor bank, evenly spaced over ``[0, pi)``.
    daisy_step, daisy_radius, daisy_rings, daisy_histograms, daisy_orientations : int
        The DAISY grid step and descriptor shape (``skimage.feature.daisy``).
    codebook_size : int
        Number of visual words (k-means centres); fewer when the photos give fewer
        distinct descriptors.
    max_descriptors : int
        At most this many descriptors (sampled evenly over the photos) train the
        codebook.
    kmeans_iterations : int
        Lloyd iterations of k-means.
    seed : int
        Seeds the descriptor sample and the k-means++ start.

    Notes
    -----
    Every setting is bounded, so that no settings (a damaged or hostile
    ``extractor.json`` among them) can make featurizing hang or exhaust memory; a
    value outside its bounds is a ``ValueError`` naming the setting and the bound.
    :data:`SETTING_BOUNDS` gives the inclusive ``(low, high)`` of each integer
    setting; besides, ``size >= 2 * daisy_radius + 1``; the HSV histogram has at
    most :data:`MAX_COLOUR_CELLS` cells; a photo gives at most
    :data:`MAX_DESCRIPTOR_VALUES` DAISY values (``grid_points * descriptor_dims``);
    ``codebook_size * max_descriptors <= MAX_KMEANS_DISTANCES`` (the k-means distance
    matrix); ``lbp`` holds 1 to :data:`MAX_BANK` pairs of points in ``LBP_POINTS``
    and radius in ``LBP_RADIUS``; ``gabor_frequencies`` at most ``MAX_BANK`` values in
    ``GABOR_FREQUENCIES`` cycles per pixel (the Gabor kernel's width grows as one
    over the frequency; 0.5 is the Nyquist frequency).
    """

    size: int = 160
    hue_bins: int = 8
    saturation_bins: int = 3
    value_bins: int = 3
    lbp: tuple[tuple[int, int], ...] = ((8, 1), (16, 2))
    gabor_frequencies: tuple[float, ...] = (0.1, 0.25)
    gabor_orientations: int = 4
    daisy_step: int = 12
    daisy_radius: int = 15
    daisy_rings: int = 2
    daisy_histograms: int = 6
    daisy_orientations: int = 8
    codebook_size: int = 100
    max_descriptors: int = 20000
    kmeans_iterations: int = 30
    seed: int = 0

    def __post_init__(self) -> None:
        for name, (low, high) in SETTING_BOUNDS.items():
            _check_range(name, getattr(self, name), low, high)
        if self.size < 2 * self.daisy_radius + 1:
            raise ValueError(
                f"size {self.size} is too small for DAISY radius {self.daisy_radius}: "
                f"use size >= {2 * self.daisy_radius + 1}"
            )
        _check_bank("lbp", self.lbp, 1)
        for points, radius in self.lbp:
            _check_range("lbp points", points, *LBP_POINTS)
            _check_range("lbp radius", radius, *LBP_RADIUS)
        _check_bank("gabor_frequencies", self.gabor_frequencies, 0)
        for frequency in self.gabor_frequencies:
            _check_range("gabor frequency", frequency, *GABOR_FREQUENCIES)
        cells = self.hue_bins * self.saturation_bins * self.value_bins
        _check_range(
            "hue_bins * saturation_bins * value_bins", cells, 1, MAX_COLOUR_CELLS
        )
        values = self.grid_points * self.descriptor_dims
        _check_range("grid_points * descriptor_dims", values, 1, MAX_DESCRIPTOR_VALUES)
        pairs = self.codebook_size * self.max_descriptors
        _check_range("codebook_size * max_descriptors", pairs, 1, MAX_KMEANS_DISTANCES)

    @classmethod
    def from_json(cls, payload: dict) -> ExtractorSettings:
        """Settings from the JSON form of :meth:`as_json`; ``ValueError`` names an
        unknown setting or a value of the wrong type."""
        if not isinstance(payload, dict):
            raise ValueError(f"settings must be a JSON object, got {payload!r}")
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(payload) - fields)
        if unknown:
            raise ValueError(f"unknown extractor settings {unknown}")
        values = {}
        for name, value in payload.items():
            if name == "lbp":
                ok = isinstance(value, list) and all(
                    isinstance(p, list) and len(p) == 2 and all(map(_is_int, p))
                    for p in value
                )
                value = tuple(tuple(p) for p in value) if ok else value
            elif name == "gabor_frequencies":
                ok = isinstance(value, list) and all(map(_is_number, value))
                value = tuple(value) if ok else value
            else:
                ok = _is_int(value) and value >= 0  # every other setting
            if not ok:
                raise ValueError(f"extractor setting {name}={value!r} is invalid")
            values[name] = value
        return cls(**values)

    def as_json(self) -> dict:
        """The settings as a JSON-able dict."""
        return dataclasses.asdict(self)

    @property
    def descriptor_dims(self) -> int:
        """Length of a DAISY descriptor: a histogram at the centre and at each ring's
        sample points, of ``daisy_orientations`` bins each."""
        return (self.daisy_rings * self.daisy_histograms + 1) * self.daisy_orientations

    @property
    def grid_points(self) -> int:
        """Descriptors per photo: the number of DAISY grid positions."""
        side = -(-(self.size - 2 * self.daisy_radius) // self.daisy_step)
        return side * side


def read_image(path: str | os.PathLike, size: int) -> np.ndarray:
    """Decode an image file into RGB floats in ``[0, 1]``, shape ``[size, size, 3]``.

    EXIF orientation is applied; grey, palette and alpha images become RGB.
    High-bit-depth grey images keep their full range: 16-bit ones (Pillow modes
    ``I;16*``) are divided by 65535; 32-bit integer ones (``I``) by 65535, or by
    their maximum when it is larger; floating-point ones (``F``) are taken as
    ``[0, 1]`` intensities, divided by their maximum when it exceeds 1. Only a
    regular file is opened (a named pipe or a device would block or never end).
    An image larger than Pillow's ``Image.MAX_IMAGE_PIXELS`` (a possible
    decompression bomb) is decoded with a warning naming the file (logger
    ``jaxannot.data.image_features``); one more than twice as large is refused.

    Whatever a damaged file makes Pillow raise (``OSError``, ``struct.error``,
    ``NotImplementedError`` for a format it only half knows, ...) is an
    :class:`UnreadableImage`; the warnings it gives about the file (``Corrupt EXIF
    data``, a decompression bomb) are logged naming the file. Names in messages go
    through :func:`~jaxannot.data.errors.printable`.

    Raises
    ------
    UnreadableImage
        When the file is not an image Pillow can decode, or not a regular file
        (the message names it).
    """
    from PIL import Image, ImageOps, UnidentifiedImageError

    name = printable(os.fspath(path))
    try:
        with _open_regular(path) as fh, warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            with Image.open(fh) as im:
                im.draft("RGB", (size, size))  # fast JPEG decoding at reduced scale
                pixels = _rgb_pixels(ImageOps.exif_transpose(im), size)
    except UnidentifiedImageError:
        raise UnreadableImage.of(name, "unknown or corrupt format") from None
    except Exception as err:  # a damaged file can raise anything from a decoder
        raise UnreadableImage.of(name, _reason(err)) from None
    for w in seen:
        if issubclass(w.category, (DeprecationWarning, FutureWarning)):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        else:  # about the file (Corrupt EXIF data, a decompression bomb): name it
            log.warning("%s: %s", name, printable(" ".join(str(w.message).split())))
    return pixels


def _reason(err: Exception) -> str:
    """What a decoder's exception says, on one printable line; prefixed by its type
    unless it is one of the errors Pillow documents for a damaged file."""
    text = printable(" ".join(str(err).split()))[:200]
    if isinstance(err, (OSError, ValueError, SyntaxError)) and text:
        return text
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def _open_regular(path: str | os.PathLike):
    """Open ``path`` for binary reading if it is a regular file.

    The open does not block on a named pipe (``O_NONBLOCK``); the type is checked on
    the open descriptor, so the file cannot be swapped in between.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError("not a regular file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


_HIGH_BIT_MODES = ("I;16", "I;16L", "I;16B", "I;16N", "I", "F")


def _rgb_pixels(im, size: int) -> np.ndarray:
    """``im`` resized to ``size x size``, as RGB floats in ``[0, 1]``."""
    from PIL import Image

    if im.mode not in _HIGH_BIT_MODES:  # 8 bits a channel: Pillow converts
        rgb = im.convert("RGB").resize((size, size), Image.Resampling.BILINEAR)
        return np.asarray(rgb, dtype=np.float32) / 255.0
    values = np.asarray(im.convert("F"), dtype=np.float32)
    values = np.where(np.isfinite(values), values, 0.0)  # NaN, inf: damaged
    top = float(values.max(initial=0.0))
    if im.mode == "F":
        full = max(top, 1.0)
    elif im.mode == "I":
        full = max(top, 65535.0)
    else:
        full = 65535.0
    grey = Image.fromarray(np.clip(values / full, 0.0, 1.0))
    grey = np.asarray(grey.resize((size, size), Image.Resampling.BILINEAR))
    return np.repeat(grey.astype(np.float32)[..., None], 3, axis=2)


def _colour_histogram(rgb: np.ndarray, s: ExtractorSettings) -> np.ndarray:
    from skimage.color import rgb2hsv

    hsv = rgb2hsv(rgb).reshape(-1, 3)
    bins = np.array([s.hue_bins, s.saturation_bins, s.value_bins])
    cells = np.minimum((hsv * bins).astype(np.int64), bins - 1)
    index = np.ravel_multi_index(cells.T, tuple(bins))
    counts = np.bincount(index, minlength=int(bins.prod())).astype(np.float64)
    return counts / counts.sum()


def _gabor_bank(s: ExtractorSettings) -> list[np.ndarray]:
    from skimage.filters import gabor_kernel

    return [
        gabor_kernel(f, theta=np.pi * o / s.gabor_orientations)
        for f in s.gabor_frequencies
        for o in range(s.gabor_orientations)
    ]


def _texture(grey: np.ndarray, s: ExtractorSettings, bank) -> np.ndarray:
    from scipy.signal import fftconvolve
    from skimage.feature import local_binary_pattern

    grey8 = np.round(grey * 255).astype(np.uint8)
    parts = []
    for points, radius in s.lbp:
        codes = local_binary_pattern(grey8, points, radius, method="uniform")
        counts = np.bincount(codes.astype(np.int64).ravel(), minlength=points + 2)
        parts.append(counts / counts.sum())
    if bank:
        centred = grey - grey.mean()
        energy = [np.abs(fftconvolve(centred, k, mode="same")).mean() for k in bank]
        parts.append(GABOR_GAIN * np.array(energy))
    return np.concatenate(parts)


def _descriptors(grey: np.ndarray, s: ExtractorSettings) -> np.ndarray:
    from skimage.feature import daisy

    d = daisy(
        grey,
        step=s.daisy_step,
        radius=s.daisy_radius,
        rings=s.daisy_rings,
        histograms=s.daisy_histograms,
        orientations=s.daisy_orientations,
    )
    return d.reshape(-1, d.shape[-1]).astype(np.float32)


def describe(rgb: np.ndarray, s: ExtractorSettings, bank=None):
    """``(colour, texture, descriptors)`` of one RGB image from :func:`read_image`.

    ``colour`` sums to 1 (before the scaling of :meth:`PhotoExtractor.views`);
    ``descriptors`` is ``[P, D]``.
    """
    from skimage.color import rgb2gray

    grey = rgb2gray(rgb)
    bank = _gabor_bank(s) if bank is None else bank
    return _colour_histogram(rgb, s), _texture(grey, s, bank), _descriptors(grey, s)


def _sq_distances(x: np.ndarray, centres: np.ndarray) -> np.ndarray:
    d = (x * x).sum(1)[:, None] - 2.0 * x @ centres.T + (centres * centres).sum(1)
    return np.maximum(d, 0.0)


def assign(descriptors: np.ndarray, codebook: np.ndarray) -> np.ndarray:
    """Index of the nearest codebook centre of every descriptor (ties: lowest)."""
    x = np.asarray(descriptors, dtype=np.float32)
    return np.argmin(_sq_distances(x, codebook), axis=1)


def fit_codebook(descriptors: np.ndarray, k: int, *, iterations: int, seed: int):
    """k-means (k-means++ start, Lloyd iterations) on ``descriptors`` ``[n, D]``.

    Returns the ``[k', D]`` centres, ``k' = min(k, distinct descriptors)``. An empty
    cluster is restarted at the descriptor farthest from its centre.
    """
    x = np.asarray(descriptors, dtype=np.float32)
    distinct = np.unique(x, axis=0)
    k = min(k, distinct.shape[0])
    rng = np.random.default_rng(seed)
    centres = np.empty((k, x.shape[1]), dtype=np.float32)
    centres[0] = distinct[rng.integers(distinct.shape[0])]
    nearest = _sq_distances(distinct, centres[:1])[:, 0]
    for j in range(1, k):  # k-means++ over the distinct descriptors
        total = nearest.sum()
        if total <= 0:
            pick = rng.integers(distinct.shape[0])
        else:
            pick = rng.choice(distinct.shape[0], p=nearest / total)
        centres[j] = distinct[pick]
        nearest = np.minimum(nearest, _sq_distances(distinct, centres[j : j + 1])[:, 0])
    for _ in range(iterations):
        d = _sq_distances(x, centres)
        labels = np.argmin(d, axis=1)
        counts = np.bincount(labels, minlength=k)
        sums = np.zeros_like(centres)
        np.add.at(sums, labels, x)
        new = centres.copy()
        filled = counts > 0
        new[filled] = sums[filled] / counts[filled, None]
        own = d[np.arange(x.shape[0]), labels]
        for j in np.flatnonzero(~filled):
            far = int(np.argmax(own))
            new[j], own[far] = x[far], 0.0
        if np.allclose(new, centres):
            centres = new
            break
        centres = new
    return centres


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

    def word_counts(self, descriptors) -> np.ndarray:
        """Visual-word counts ``[n, words]`` of a list of ``[P, D]`` descriptors."""
        k = self.codebook.shape[0]
        counts = [
            np.bincount(assign(d, self.codebook), minlength=k) for d in descriptors
        ]
        return np.stack(counts).astype(np.float32)

    def views(self, colour, texture, words) -> dict[str, np.ndarray]:
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
        paths,
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

        bank = _gabor_bank(self.settings)
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
        if codebook.shape[0] < 1 or not np.isfinite(codebook).all():
            raise DataFormatError(npz, f"empty or non-finite codebook; {remedy}")
        return cls(settings, codebook.astype(np.float32), float(scale))


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return _is_int(value) or (isinstance(value, float) and math.isfinite(value))


def _rescale(rows, scale: float) -> np.ndarray:
    rows = np.asarray(rows, dtype=np.float64)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return (rows * (scale / np.maximum(norms, 1e-12))).astype(np.float32)
