"""The :class:`Corpus`: images with named feature views, words, labels and masks.

A corpus is a frozen pytree. Its array fields are leaves (so it can be passed through
``jax.jit`` / ``vmap``), its names and vocabularies are static metadata.

Conventions
-----------
- Every array's first axis is the image axis, of length ``num_images``.
- A *feature view* is a dense 2-D array ``[images, dims]``. Its ``view_kinds`` entry
  says how to read it: ``"bag"`` (non-negative token counts, e.g. visual words or
  blob tokens), ``"binary"`` (0/1 presence) or ``"real"`` (real-valued features).
- ``words`` is the *text view*: the annotation words / tags / concepts of each image as
  a ``[images, words]`` count or 0/1 matrix. It is what annotators learn to predict.
  Datasets without annotation words (pure classification) have ``words=None``.
- ``word_mask[i]`` is True when the words of image ``i`` are observed. The rows of
  ``words`` for unobserved images are all zero: methods never see hidden words.
  Ground truth for evaluation lives in :class:`jaxannot.data.protocols.Task`.
- ``labels`` holds class labels (int, ``-1`` where hidden or unknown), or ``None``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

import jax

__all__ = ["Corpus", "VIEW_KINDS"]

VIEW_KINDS = ("bag", "binary", "real")


@dataclasses.dataclass(frozen=True)
class Corpus:
    """Images with named feature views, annotation words and class labels.

    Parameters
    ----------
    views : Mapping[str, array [images, dims]]
        Named feature views (visual words, blob tokens, colour moments, SIFT, ...).
    view_kinds : Mapping[str, str]
        ``"bag"``, ``"binary"`` or ``"real"`` for each view.
    words : array [images, words] or None
        The text view (observed rows only; hidden rows are zero).
    word_mask : bool array [images]
        Which images have their words observed.
    labels : int array [images] or None
        Class labels, ``-1`` where hidden.
    word_names : tuple of str
        Vocabulary of the text view.
    class_names : tuple of str
        Names of the classes (``labels`` index into it).
    feature_names : Mapping[str, tuple of str]
        Optional dimension names of each view.
    name : str
        Dataset name (for reports).

    Examples
    --------
    >>> import numpy as np
    >>> c = Corpus.from_arrays({"blobs": np.eye(3)}, words=np.eye(3)[:, :2],
    ...                        view_kinds={"blobs": "bag"})
    >>> c.num_images, c.num_words, c.primary_view
    (3, 2, 'blobs')
    """

    views: Mapping[str, np.ndarray]
    view_kinds: Mapping[str, str]
    words: np.ndarray | None = None
    word_mask: np.ndarray | None = None
    labels: np.ndarray | None = None
    word_names: tuple[str, ...] = ()
    class_names: tuple[str, ...] = ()
    feature_names: Mapping[str, tuple[str, ...]] = dataclasses.field(
        default_factory=dict
    )
    name: str = "corpus"

    # ------------------------------------------------------------------ checks
    def __post_init__(self) -> None:
        if not self.views:
            raise ValueError("a Corpus needs at least one feature view")
        n = None
        for key, x in self.views.items():
            if _is_placeholder(x):
                return  # pytree unflattening with non-array leaves (jax internals)
            if x.ndim != 2:
                raise ValueError(
                    f"view {key!r} must be 2-D [images, dims], got {x.shape}"
                )
            if n is None:
                n = x.shape[0]
            elif x.shape[0] != n:
                raise ValueError(
                    f"view {key!r} has {x.shape[0]} images, expected {n} "
                    f"(views: {[(k, v.shape) for k, v in self.views.items()]})"
                )
            kind = self.view_kinds.get(key)
            if kind not in VIEW_KINDS:
                raise ValueError(
                    f"view {key!r} has kind {kind!r}; valid kinds: {list(VIEW_KINDS)}"
                )
        if self.words is not None and not _is_placeholder(self.words):
            if self.words.ndim != 2 or self.words.shape[0] != n:
                raise ValueError(
                    f"words must be [images={n}, words], got {self.words.shape}"
                )
            if self.word_names and len(self.word_names) != self.words.shape[1]:
                raise ValueError(
                    f"{len(self.word_names)} word names for {self.words.shape[1]} words"
                )
        if self.word_mask is not None and not _is_placeholder(self.word_mask):
            if self.word_mask.shape != (n,):
                raise ValueError(
                    f"word_mask must be [images={n}], got {self.word_mask.shape}"
                )
        if self.labels is not None and not _is_placeholder(self.labels):
            if self.labels.shape != (n,):
                raise ValueError(
                    f"labels must be [images={n}], got {self.labels.shape}"
                )

    # ------------------------------------------------------------ constructors
    @classmethod
    def from_arrays(
        cls,
        views: Mapping[str, np.ndarray],
        *,
        view_kinds: Mapping[str, str] | None = None,
        words: np.ndarray | None = None,
        word_mask: np.ndarray | None = None,
        labels: np.ndarray | None = None,
        word_names: tuple[str, ...] | None = None,
        class_names: tuple[str, ...] | None = None,
        name: str = "corpus",
    ) -> Corpus:
        """Build a corpus from arrays, validating values.

        Raises ``ValueError`` naming the view for NaN/inf features, negative bag counts
        or an empty vocabulary. Default kinds: ``"real"`` for every view; default mask:
        all images observed where ``words`` is given.
        """
        views = {k: np.asarray(v) for k, v in views.items()}
        kinds = dict(view_kinds or {})
        for k, v in views.items():
            kinds.setdefault(k, "real")
            if v.ndim != 2:
                raise ValueError(
                    f"view {k!r} must be 2-D [images, dims], got {v.shape}"
                )
            if v.shape[1] == 0:
                raise ValueError(f"view {k!r} has an empty vocabulary (0 dimensions)")
            if not np.all(np.isfinite(v)):
                bad = np.argwhere(~np.isfinite(v))[0]
                raise ValueError(
                    f"view {k!r} has a NaN/inf value at image {bad[0]}, dim {bad[1]}"
                )
            if kinds[k] in ("bag", "binary") and np.any(v < 0):
                raise ValueError(
                    f"view {k!r} is a {kinds[k]} view with negative values"
                )
        if words is not None:
            words = np.asarray(words, dtype=np.float32)
            if words.ndim != 2 or words.shape[1] == 0:
                raise ValueError(
                    f"words must be a non-empty [images, words] matrix: {words.shape}"
                )
            if not np.all(np.isfinite(words)) or np.any(words < 0):
                raise ValueError("words must be finite non-negative counts")
            if word_mask is None:
                word_mask = np.ones(words.shape[0], dtype=bool)
            word_mask = np.asarray(word_mask, dtype=bool)
            words = np.where(word_mask[:, None], words, 0.0).astype(np.float32)
            if word_names is None:
                word_names = tuple(f"w{i}" for i in range(words.shape[1]))
        if labels is not None:
            labels = np.asarray(labels, dtype=np.int32)
            if class_names is None:
                class_names = tuple(str(i) for i in range(int(labels.max()) + 1))
        return cls(
            views=views,
            view_kinds=kinds,
            words=words,
            word_mask=word_mask,
            labels=labels,
            word_names=tuple(word_names or ()),
            class_names=tuple(class_names or ()),
            name=name,
        )

    # ------------------------------------------------------------- properties
    @property
    def num_images(self) -> int:
        return next(iter(self.views.values())).shape[0]

    @property
    def num_words(self) -> int:
        return 0 if self.words is None else self.words.shape[1]

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    @property
    def view_names(self) -> tuple[str, ...]:
        return tuple(self.views)

    @property
    def primary_view(self) -> str:
        """The first feature view: the one annotators use when not told otherwise."""
        return next(iter(self.views))

    def view(self, name: str | None = None) -> np.ndarray:
        """Return a view by name (the primary view when ``name`` is None)."""
        if name is None:
            name = self.primary_view
        if name not in self.views:
            raise KeyError(f"unknown view {name!r}; valid views: {list(self.views)}")
        return self.views[name]

    def features(self, view: str = "") -> np.ndarray:
        """A view as float32 by name; ``""`` or ``"all"``: all views side by side."""
        if view in ("", "all"):
            return self.concatenated_views()
        return np.asarray(self.view(view), dtype=np.float32)

    def concatenated_views(self) -> np.ndarray:
        """All feature views side by side, ``[images, sum of dims]``."""
        return np.concatenate(
            [np.asarray(v, dtype=np.float32) for v in self.views.values()], axis=1
        )

    # -------------------------------------------------------------- selection
    def subset(self, rows: np.ndarray) -> Corpus:
        """The corpus restricted to ``rows`` (indices or a boolean mask)."""
        rows = np.asarray(rows)
        pick = lambda a: None if a is None else np.asarray(a)[rows]
        return dataclasses.replace(
            self,
            views={k: np.asarray(v)[rows] for k, v in self.views.items()},
            words=pick(self.words),
            word_mask=pick(self.word_mask),
            labels=pick(self.labels),
        )

    def with_hidden(self, hidden: np.ndarray) -> Corpus:
        """Hide the words and labels of the images where ``hidden`` is True."""
        hidden = np.asarray(hidden, dtype=bool)
        words, mask, labels = self.words, self.word_mask, self.labels
        if words is not None:
            mask = np.asarray(mask) & ~hidden
            words = np.where(mask[:, None], np.asarray(words), 0.0).astype(np.float32)
        if labels is not None:
            labels = np.where(hidden, -1, np.asarray(labels)).astype(np.int32)
        return dataclasses.replace(self, words=words, word_mask=mask, labels=labels)

    def observed_words(self) -> tuple[np.ndarray, np.ndarray]:
        """The word mask and the words (float32), for a method that learns from them.

        Returns
        -------
        mask : bool array [images]
            ``word_mask``.
        words : float32 array [images, words]
            ``words``, every row (hidden ones are zero).

        Raises
        ------
        ValueError
            When the corpus has no annotation words or none of its images has them
            observed.
        """
        if self.words is None:
            raise ValueError(
                f"corpus {self.name!r} has no annotation words: no words to learn from"
            )
        mask = np.asarray(self.word_mask, dtype=bool)
        if not mask.any():
            raise ValueError(f"no image of corpus {self.name!r} has observed words")
        return mask, np.asarray(self.words, dtype=np.float32)

    def observed(self) -> Corpus:
        """The images whose words (or, without words, labels) are observed."""
        if self.words is not None:
            return self.subset(np.asarray(self.word_mask))
        if self.labels is not None:
            return self.subset(np.asarray(self.labels) >= 0)
        return self


def _is_placeholder(x) -> bool:
    return not hasattr(x, "shape") or not hasattr(x, "ndim")


def _flatten(c: Corpus):
    children = (dict(c.views), c.words, c.word_mask, c.labels)
    aux = (
        tuple(c.view_kinds.items()),
        c.word_names,
        c.class_names,
        tuple((k, tuple(v)) for k, v in c.feature_names.items()),
        c.name,
    )
    return children, aux


def _unflatten(aux, children):
    views, words, word_mask, labels = children
    kinds, word_names, class_names, feature_names, name = aux
    obj = object.__new__(Corpus)
    for field, value in (
        ("views", views),
        ("view_kinds", dict(kinds)),
        ("words", words),
        ("word_mask", word_mask),
        ("labels", labels),
        ("word_names", word_names),
        ("class_names", class_names),
        ("feature_names", dict(feature_names)),
        ("name", name),
    ):
        object.__setattr__(obj, field, value)
    return obj


jax.tree_util.register_pytree_node(Corpus, _flatten, _unflatten)
