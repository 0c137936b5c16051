"""The bytes of a v5 MAT-file element, read or inflated a chunk at a time.

:class:`_FileStream` reads an uncompressed element a few bytes at a time and skips
over the rest; :class:`_InflateStream` inflates a compressed one as far as it is
read, :data:`_CHUNK` bytes at a time; :func:`_inflated_size` counts what a
compressed element inflates to up to a budget. A stream that ends early or is
damaged raises :class:`_End`.
"""

from __future__ import annotations

import os
import zlib

_CHUNK = 2**20  # bytes inflated at a time while counting a compressed element


def _inflated_size(fh, length: int, budget: int) -> int:
    """Length of the next ``length`` bytes of ``fh`` inflated, read and inflated
    ``_CHUNK`` bytes at a time; stops as soon as it passes ``budget`` (or the
    stream is damaged or ends)."""
    inflater = zlib.decompressobj()
    total = 0
    try:
        while length > 0 and total <= budget and not inflater.eof:
            pending = fh.read(min(_CHUNK, length))
            if not pending:
                break
            length -= len(pending)
            while pending and total <= budget:
                total += len(inflater.decompress(pending, _CHUNK))
                pending = inflater.unconsumed_tail
    except zlib.error:
        pass
    return total


class _End(Exception):
    """A v5 element list that ends early or is malformed: the walk stops there
    (scipy then reports the damage)."""


class _FileStream:
    """The ``length`` bytes of an uncompressed v5 element, from the file ``fh``
    positioned at their start: read a few at a time, skipped over by seeks."""

    def __init__(self, fh, length: int) -> None:
        self.fh, self.left, self.pos = fh, length, 0

    def read(self, n: int) -> bytes:
        data = self.fh.read(n) if n <= self.left else b""
        if len(data) < n:
            raise _End
        self.left -= n
        self.pos += n
        return data

    def skip(self, n: int) -> None:
        if not 0 <= n <= self.left:
            raise _End
        self.fh.seek(n, os.SEEK_CUR)
        self.left -= n
        self.pos += n


class _InflateStream:
    """The inflated bytes of a compressed v5 element (``length`` bytes of ``fh``),
    inflated as far as they are read or skipped, :data:`_CHUNK` bytes at a time
    (the file read a chunk at a time too)."""

    def __init__(self, fh, length: int) -> None:
        self.fh, self.left, self.pos = fh, length, 0
        self.inflater = zlib.decompressobj()
        self.buffer = bytearray()

    def _more(self) -> None:
        pending = self.inflater.unconsumed_tail
        if not pending:
            if self.inflater.eof or self.left <= 0:
                raise _End
            pending = self.fh.read(min(_CHUNK, self.left))
            if not pending:
                raise _End
            self.left -= len(pending)
        try:
            self.buffer += self.inflater.decompress(pending, _CHUNK)
        except zlib.error:
            raise _End from None

    def read(self, n: int) -> bytes:
        while len(self.buffer) < n:
            self._more()
        data = bytes(self.buffer[:n])
        del self.buffer[:n]
        self.pos += n
        return data

    def skip(self, n: int) -> None:
        if n < 0:
            raise _End
        self.pos += n
        while n > 0:
            if not self.buffer:
                self._more()
            taken = min(n, len(self.buffer))
            del self.buffer[:taken]
            n -= taken
