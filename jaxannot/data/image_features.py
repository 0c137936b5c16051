"""Features of photos: colour histogram, texture, and visual words over a codebook.

A :class:`~jaxannot.data.photo_extractor.PhotoExtractor` turns an image file into three
feature views, computed here (:func:`read_image`, :func:`describe`, :func:`assign`,
:func:`fit_codebook`) with the settings of
:class:`~jaxannot.data.extractor_settings.ExtractorSettings`:

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

import logging
import os
import stat
import warnings

import numpy as np

from jaxannot.data.errors import printable
from jaxannot.data.extractor_settings import ExtractorSettings

__all__ = [
    "UnreadableImage",
    "read_image",
    "describe",
    "assign",
    "fit_codebook",
    "VIEW_KINDS",
    "gabor_bank",
]

VIEW_KINDS = {"colour": "real", "texture": "real", "visual_words": "bag"}
GABOR_GAIN = 10.0  # mean |response| of a [0, 1] grey image, to the scale of LBP bins

log = logging.getLogger(__name__)


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


def gabor_bank(s: ExtractorSettings) -> list[np.ndarray]:
    """The Gabor kernels of the texture features: one per frequency and orientation.

    Parameters
    ----------
    s : ExtractorSettings
        The extractor's settings (``gabor_frequencies``, ``gabor_orientations``).

    Returns
    -------
    list of numpy.ndarray
        Complex kernels, frequency-major, the orientations evenly spaced over
        half a turn.
    """
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


def describe(
    rgb: np.ndarray, s: ExtractorSettings, bank: list[np.ndarray] | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(colour, texture, descriptors)`` of one RGB image from :func:`read_image`.

    ``colour`` sums to 1 (before the scaling of :meth:`PhotoExtractor.views`);
    ``descriptors`` is ``[P, D]``.
    """
    from skimage.color import rgb2gray

    grey = rgb2gray(rgb)
    bank = gabor_bank(s) if bank is None else bank
    return _colour_histogram(rgb, s), _texture(grey, s, bank), _descriptors(grey, s)


def _sq_distances(x: np.ndarray, centres: np.ndarray) -> np.ndarray:
    d = (x * x).sum(1)[:, None] - 2.0 * x @ centres.T + (centres * centres).sum(1)
    return np.maximum(d, 0.0)


def assign(descriptors: np.ndarray, codebook: np.ndarray) -> np.ndarray:
    """Index of the nearest codebook centre of every descriptor (ties: lowest)."""
    x = np.asarray(descriptors, dtype=np.float32)
    return np.argmin(_sq_distances(x, codebook), axis=1)


def fit_codebook(
    descriptors: np.ndarray, k: int, *, iterations: int, seed: int
) -> np.ndarray:
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
