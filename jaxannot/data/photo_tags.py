r"""The photos of a folder and their tags: :func:`list_photos`, :func:`read_tags`.

A tags CSV has the header ``file,tags`` and one row per photo, its tags separated by
spaces; :func:`tags_by_file` matches its rows (or a ``{file: [tags]}`` mapping) to
the photos of a folder for :func:`~jaxannot.data.photo_build.build_photo_dataset`.
"""

from __future__ import annotations

import contextlib
import csv
import io
import logging
import os
import pathlib
from collections.abc import Iterator, Mapping

from jaxannot.data.bounded import MAX_TEXT_BYTES, read_limited
from jaxannot.data.errors import DataFormatError, printable

__all__ = [
    "list_photos",
    "read_tags",
    "tags_by_file",
    "read_checked_text",
    "csv_errors",
]

log = logging.getLogger("jaxannot.data.photos")  # the photo datasets' one logger

#: How many folder levels below the photo folder :func:`list_photos` descends.
MAX_DEPTH = 64


def list_photos(
    folder: str | os.PathLike, exclude: str | os.PathLike | None = None
) -> list[str]:
    """Every file under ``folder`` (recursively, sorted), relative and ``/``-separated.

    Hidden files and folders (names starting with ``.``) and everything under
    ``exclude`` are left out. No file is opened: which files are images is found
    when they are read. A subfolder that cannot be listed, or lies more than
    :data:`MAX_DEPTH` levels down, is skipped with a warning naming it (logger
    ``jaxannot.data.photos``); links to folders are not followed. The walk is
    iterative (a folder nested 1100 levels deep raised ``RecursionError``).

    Raises
    ------
    NotADirectoryError
        ``folder`` is not a folder.
    PermissionError
        ``folder`` itself cannot be listed (or another ``OSError`` saying why).
    """
    root = pathlib.Path(folder)
    if not root.is_dir():
        raise NotADirectoryError(f"{folder}: not a folder of photos")
    skip = pathlib.Path(exclude).resolve() if exclude is not None else None
    found = []

    def unreadable(err: OSError) -> None:
        why = err.strerror or str(err)
        if pathlib.Path(err.filename) == root:
            raise type(err)(err.errno, f"{printable(root)}: cannot be listed ({why})")
        log.warning(
            "skipped folder %s: cannot be listed (%s)", printable(err.filename), why
        )

    stack = [(root, 0)]  # iterative: os.walk recursed (RecursionError ~1000 deep)
    while stack:
        here, depth = stack.pop()
        try:
            entries = list(os.scandir(here))
        except OSError as err:
            unreadable(err)
            continue
        for entry in entries:
            if entry.name.startswith("."):
                continue
            try:
                is_dir = entry.is_dir()  # links followed, as os.walk classified them
                linked_dir = is_dir and entry.is_symlink()
            except OSError:
                is_dir = linked_dir = False
            path = here / entry.name
            if not is_dir:
                found.append(path.relative_to(root).as_posix())
            elif linked_dir:  # not followed (as os.walk): no loops, no escapes
                continue
            elif skip is not None and path.resolve() == skip:
                continue
            elif depth >= MAX_DEPTH:
                log.warning(
                    "skipped folder %s: more than %d levels below %s",
                    printable(path), MAX_DEPTH, printable(root),
                )  # fmt: skip
            else:
                stack.append((path, depth + 1))
    return sorted(found)


def read_tags(path: str | os.PathLike) -> dict[str, list[str]]:
    """Read a tags CSV: header ``file,tags``, one row per photo, tags space-separated.

    Returns ``{file: [tags]}`` (``file`` stripped of surrounding spaces and of a
    leading ``./``, ``\\`` separators turned into ``/``; when a tags CSV is given
    to :func:`build_photo_dataset`, a name that is exactly a photo's, spaces and
    backslashes included, names that photo instead). A photo may have an empty tag
    list. A row with more fields than the header (tags
    separated by commas, ``cat.png,cat,animal``, or a file name with an unquoted
    comma) is an error, never a silent loss of the tags after the comma.

    Raises
    ------
    DataFormatError
        Missing columns, a row with more fields than the header, a quoted field
        running over several lines (one unbalanced quote swallowed every row after
        it, silently), or a file listed twice (the message gives the line).
    """
    return _keyed_tags(path, _tag_rows(path))


def _tag_rows(path) -> list[tuple[str, int, list[str]]]:
    """``(file as written, line, tags)`` of each row of the tags CSV ``path``."""
    reader = csv.DictReader(io.StringIO(read_checked_text(path, "utf-8-sig")))
    with csv_errors(path, reader):
        return _raw_tag_rows(path, reader)


def _keyed_tags(path, rows, photos=frozenset()) -> dict[str, list[str]]:
    """``{file: tags}`` of ``rows``: a file that is one of ``photos`` as written is
    kept as it is, any other normalised (:func:`read_tags`)."""
    out: dict[str, list[str]] = {}
    for raw, line, tags in rows:
        name = raw if raw in photos else _normalise(raw.strip())
        if not name:
            raise DataFormatError(path, "empty file name", line=line)
        if name in out:
            raise DataFormatError(path, f"{name!r} listed twice", line=line)
        out[name] = tags
    return out


def read_checked_text(
    path: str | os.PathLike, encoding: str = "utf-8", what: str = "CSV file"
) -> str:
    """The text of the regular file ``path``, its size checked before it is read
    (:func:`~jaxannot.data.bounded.read_limited`); DataFormatError when it is not
    UTF-8.

    Parameters
    ----------
    path : str or os.PathLike
        The file.
    encoding : str, optional
        Its text encoding.
    what : str, optional
        What the file is, for the messages.

    Returns
    -------
    str
        Its text, line ends as ``"\\n"``.

    Raises
    ------
    DataFormatError
        The file is too big, not a regular file, or not text in ``encoding``.
    """
    raw = read_limited(path, what, MAX_TEXT_BYTES, "a CSV file is read whole")
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise DataFormatError(
            path, f"not UTF-8 text (byte {raw[err.start]:#04x})", line
        ) from None
    return text.replace("\r\n", "\n").replace("\r", "\n")  # as read_text did


@contextlib.contextmanager
def csv_errors(path: str | os.PathLike, reader: csv.DictReader) -> Iterator[None]:
    """A ``csv.Error`` (a field over the csv module's 131,072 characters, a NUL
    byte, ...) as a DataFormatError naming the file and the line.

    Parameters
    ----------
    path : str or os.PathLike
        The file, for the message.
    reader : csv.DictReader
        The reader of its rows, for the line number.

    Yields
    ------
    None
        Around the reading of the rows.

    Raises
    ------
    DataFormatError
        The reader raised ``csv.Error``.
    """
    try:
        yield
    except csv.Error as err:  # raised before the reader counts the failing line
        raise DataFormatError(
            path, f"not a CSV table ({err})", reader.line_num + 1
        ) from None


def _raw_tag_rows(path, reader) -> list[tuple[str, int, list[str]]]:
    columns = [c.strip() for c in (reader.fieldnames or [])]
    if "file" not in columns or "tags" not in columns:
        raise DataFormatError(
            path, f"needs a header with columns 'file,tags', got {columns}", line=1
        )
    reader.fieldnames = columns
    out = []
    first = reader.line_num + 1  # the line the next row starts on
    for row in reader:
        start, first = first, reader.line_num + 1
        if start != reader.line_num and any(
            "\n" in v for v in row.values() if isinstance(v, str)
        ):
            raise DataFormatError(
                path,
                f"a quoted field opened on this line runs to line {reader.line_num}: "
                'an unbalanced quote? quote a whole file name ("a,b.png") or none',
                line=start,
            )
        if None in row:  # DictReader's key for the fields beyond the header's
            raise DataFormatError(
                path,
                f"{len(columns) + len(row[None])} fields, the header has "
                f"{len(columns)} ({','.join(columns)}): separate tags with spaces, "
                f"not commas, and quote a file name holding a comma",
                line=reader.line_num,
            )
        tags = (row.get("tags") or "").split()
        out.append((row.get("file") or "", reader.line_num, tags))
    return out


def _normalise(name: str) -> str:
    name = name.replace("\\", "/")
    while name.startswith("./"):
        name = name[2:]
    return name


def tags_by_file(
    tags: str | os.PathLike | Mapping[str, list[str]] | None, photos: list[str]
) -> dict[str, list[str]]:
    """``{file: [tags]}`` of a tags CSV (:func:`read_tags`; a name that is exactly
    one of ``photos`` names that photo) or of a mapping (its names normalised);
    empty without ``tags``."""
    if isinstance(tags, Mapping):
        return {_normalise(k): list(v) for k, v in tags.items()}
    rows = _tag_rows(tags) if tags is not None else []
    return _keyed_tags(tags, rows, set(photos))
