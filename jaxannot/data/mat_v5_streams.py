"""The bytes of a v5 MAT-file element, read or inflated a chunk at a time.

An :class:`ElementStream` gives an element's bytes in order (``read``, ``skip``):
:class:`FileStream` reads an uncompressed element a few bytes at a time and skips
over the rest; :class:`InflateStream` inflates a compressed one as far as it is
read, :data:`INFLATE_CHUNK` bytes at a time; :func:`inflated_size` counts what a
compressed element inflates to up to a budget. A stream that ends early or is
damaged raises :class:`StreamEnd`.
"""

from __future__ import annotations

import os
import zlib
from typing import BinaryIO

INFLATE_CHUNK = 2**20  # bytes inflated at a time while counting a compressed element


def inflated_size(fh: BinaryIO, length: int, budget: int) -> int:
    """Length of the next ``length`` bytes of ``fh`` inflated, read and inflated
    ``INFLATE_CHUNK`` bytes at a time; stops as soon as it passes ``budget`` (or the
    stream is damaged or ends).

    Parameters
    ----------
    fh : BinaryIO
        The file, at the compressed data.
    length : int
        The compressed bytes.
    budget : int
        The count stops once past this many inflated bytes.

    Returns
    -------
    int
        The inflated bytes counted.
    """
    inflater = zlib.decompressobj()
    total = 0
    try:
        while length > 0 and total <= budget and not inflater.eof:
            pending = fh.read(min(INFLATE_CHUNK, length))
            if not pending:
                break
            length -= len(pending)
            while pending and total <= budget:
                total += len(inflater.decompress(pending, INFLATE_CHUNK))
                pending = inflater.unconsumed_tail
    except zlib.error:
        pass
    return total


class StreamEnd(Exception):
    """A v5 element list that ends early or is malformed: the walk stops there
    (scipy then reports the damage)."""


class ElementStream:
    """The protocol of a stream (module docstring): the bytes of one v5 element,
    read in order, as :class:`FileStream` and :class:`InflateStream` both give them;
    their methods are documented here once.

    Parameters
    ----------
    fh : BinaryIO
        The file, positioned at the element's data.
    length : int
        The element's bytes in the file.

    Attributes
    ----------
    pos : int
        Bytes read or skipped so far (of the inflated data, for a compressed one).
    """

    def __init__(self, fh: BinaryIO, length: int) -> None:
        self.fh, self.left, self.pos = fh, length, 0

    def read(self, n: int) -> bytes:
        """The next ``n`` bytes.

        Parameters
        ----------
        n : int
            How many.

        Returns
        -------
        bytes
            Exactly ``n`` bytes.

        Raises
        ------
        StreamEnd
            Fewer than ``n`` bytes are left, or (a compressed element) its data is
            damaged.
        """
        raise NotImplementedError

    def skip(self, n: int) -> None:
        """Move past the next ``n`` bytes without returning them.

        Parameters
        ----------
        n : int
            How many.

        Raises
        ------
        StreamEnd
            ``n`` is negative or more than are left, or (a compressed element) its
            data is damaged.
        """
        raise NotImplementedError


class FileStream(ElementStream):
    """The ``length`` bytes of an uncompressed v5 element, from the file ``fh``
    positioned at their start: read a few at a time, skipped over by seeks."""

    def read(self, n: int) -> bytes:
        data = self.fh.read(n) if n <= self.left else b""
        if len(data) < n:
            raise StreamEnd
        self.left -= n
        self.pos += n
        return data

    def skip(self, n: int) -> None:
        if not 0 <= n <= self.left:
            raise StreamEnd
        self.fh.seek(n, os.SEEK_CUR)
        self.left -= n
        self.pos += n


class InflateStream(ElementStream):
    """The inflated bytes of a compressed v5 element (``length`` bytes of ``fh``),
    inflated as far as they are read or skipped, :data:`INFLATE_CHUNK` bytes at a time
    (the file read a chunk at a time too)."""

    def __init__(self, fh: BinaryIO, length: int) -> None:
        super().__init__(fh, length)
        self.inflater = zlib.decompressobj()
        self.buffer = bytearray()

    def _more(self) -> None:
        pending = self.inflater.unconsumed_tail
        if not pending:
            if self.inflater.eof or self.left <= 0:
                raise StreamEnd
            pending = self.fh.read(min(INFLATE_CHUNK, self.left))
            if not pending:
                raise StreamEnd
            self.left -= len(pending)
        try:
            self.buffer += self.inflater.decompress(pending, INFLATE_CHUNK)
        except zlib.error:
            raise StreamEnd from None

    def read(self, n: int) -> bytes:
        while len(self.buffer) < n:
            self._more()
        data = bytes(self.buffer[:n])
        del self.buffer[:n]
        self.pos += n
        return data

    def skip(self, n: int) -> None:
        if n < 0:
            raise StreamEnd
        self.pos += n
        while n > 0:
            if not self.buffer:
                self._more()
            taken = min(n, len(self.buffer))
            del self.buffer[:taken]
            n -= taken
