"""How photos are featurized: :class:`ExtractorSettings` and the bounds of each setting.

The settings of a :class:`~jaxannot.data.photo_extractor.PhotoExtractor` (everything
but its learned codebook), checked against :data:`SETTING_BOUNDS` and the limits
below, so that no settings (a damaged or hostile ``extractor.json`` among them) can
make featurizing hang or exhaust memory. The features they set are described in
:mod:`jaxannot.data.image_features`.
"""

from __future__ import annotations

import dataclasses
import math

__all__ = ["ExtractorSettings", "SETTING_BOUNDS"]

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


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return _is_int(value) or (isinstance(value, float) and math.isfinite(value))
